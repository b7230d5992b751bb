// _softmax over the last, contiguous dim (attention rows) through the SIMD
// table, rows split across the pool; anything else (other dims, strided
// tensors, non-float) goes to the portable kernel, which owns the errors.
#include "kernels/optimized/optimized_ops.h"

#include <vector>

#include "kernels/optimized/gemm.h"

#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

// [self, dim, half_to_float, out, ret]
Status softmax_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[3]->is_tensor() || !args[1]->is_int() ||
      !args[2]->is_bool() || args[2]->i != 0) {
    return kernels::SoftmaxOut(ctx, args);
  }
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[3]->tensor;
  const int rank = self.dim();
  int64_t dim = args[1]->i;
  if (dim < 0) dim += rank;
  const ScalarType t = self.dtype();
  const bool half = t == ScalarType::kBFloat16 || t == ScalarType::kHalf;
  if (rank == 0 || dim != rank - 1 || (t != ScalarType::kFloat && !half) || out.dtype() != t ||
      !self.is_contiguous() || self.raw_data() == nullptr || self.size(rank - 1) == 0) {
    return kernels::SoftmaxOut(ctx, args);
  }
  if (!out.resize(self.sizes()) || !out.is_contiguous()) return kernels::SoftmaxOut(ctx, args);
  const int64_t n = self.size(rank - 1), rows = self.numel() / n;
  if (!half) {
    softmax_rows_f32(self.data<float>(), out.data<float>(), rows, n);
  } else {
    // 16-bit rows (HF's softmax(dtype=float32).to(dtype)): widened, the f32 row loop, rounded once.
    const SimdKernels& k = simd();
    const uint16_t* x = self.data<uint16_t>();
    uint16_t* y = out.data<uint16_t>();
    const bool bf16 = t == ScalarType::kBFloat16;
    parallel_for(rows, rows * n >= 16384 ? 1 : rows, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        (bf16 ? k.bf16_to_float_row : k.half_to_float_row)(x + r * n, row.data(), n);
        k.softmax_row(row.data(), row.data(), n);
        (bf16 ? k.float_to_bf16_row : k.float_to_half_row)(row.data(), y + r * n, n);
      }
    });
  }
  if (args[4] != args[3]) *args[4] = *args[3];
  return Status::ok();
}

void sigmoid_f32(const float* x, float* y, int64_t n) {
  const SimdKernels& k = simd();
  constexpr int64_t kBlock = 4096;
  parallel_for(n, n >= 4 * kBlock ? kBlock : n, [&](int64_t i0, int64_t i1) { k.sigmoid_row(x + i0, y + i0, i1 - i0); });
}

void gelu_f32(const float* x, float* y, int64_t n) {
  const SimdKernels& k = simd();
  constexpr int64_t kBlock = 4096;
  parallel_for(n, n >= 4 * kBlock ? kBlock : n, [&](int64_t i0, int64_t i1) { k.gelu_row(x + i0, y + i0, i1 - i0); });
}

void softmax_rows_f32(const float* x, float* y, int64_t rows, int64_t n) {
  const SimdKernels& k = simd();
  parallel_for(rows, rows * n >= 16384 ? 1 : rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) k.softmax_row(x + r * n, y + r * n, n);
  });
}

}  // namespace hf2pte::kernels
