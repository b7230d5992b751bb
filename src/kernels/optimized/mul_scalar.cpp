// mul.Scalar_out for contiguous float32 (the attention's score scaling and
// the embedding scale): one vectorizable loop, large tensors across the pool. Same arithmetic as the
// portable kernel (the scalar rounded to float once, then float products);
// anything else is the portable kernel's.
#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Blocks of 8 with a fixed trip count: -O2's cheap vectorizer emits SIMD.
void scale_distinct(const float* __restrict x, float* __restrict y, int64_t n, float s) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int64_t j = 0; j < 8; ++j) y[i + j] = x[i + j] * s;
  }
  for (; i < n; ++i) y[i] = x[i] * s;
}

}  // namespace

// [self, other, out, ret]
Status mul_scalar_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 4 || !args[0]->is_tensor() || !args[2]->is_tensor() ||
      !(args[1]->is_double() || args[1]->is_int())) {
    return kernels::MulScalarOut(ctx, args);
  }
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[2]->tensor;
  const bool fast = self.dtype() == ScalarType::kFloat && out.dtype() == ScalarType::kFloat && self.is_contiguous() &&
                    (self.numel() == 0 || self.raw_data() != nullptr);
  if (!fast || !out.resize(self.sizes()) || !out.is_contiguous()) return kernels::MulScalarOut(ctx, args);
  const float s = float(args[1]->scalar_as_double());
  const float* x = self.data<float>();
  float* y = out.data<float>();
  const int64_t n = self.numel();
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    if (x == y) {
      for (int64_t i = b; i < e; ++i) y[i] *= s;
    } else {
      scale_distinct(x + b, y + b, e - b, s);
    }
  });
  if (args[3] != args[2]) *args[3] = *args[2];
  return Status::ok();
}

}  // namespace hf2pte::kernels
