// permute_copy for the two layouts LLM graphs use: permutations that keep the
// last dim (heads <-> sequence: row memcpys) and a swap of the last two dims
// with the leading dims in place (the KV cache transposed for q . k^T: tiled
// 2-D transposes, one batch per task). Both need contiguous self and out of
// the same dtype, 4-byte (f32) or 2-byte (bf16/f16) elements; everything else is the portable kernel's (it owns errors).
#include "kernels/optimized/optimized_ops.h"

#include "kernels/optimized/gemm.h"

#include <array>
#include <cstring>

#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

template <typename T>
void transpose_2d(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kB = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kB) {
    const int64_t r1 = std::min(rows, r0 + kB);
    for (int64_t c0 = 0; c0 < cols; c0 += kB) {
      const int64_t c1 = std::min(cols, c0 + kB);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

/// permute_4byte for elements of type T (4 bytes: f32/i32; 2 bytes: bf16/f16).
template <typename T>
bool permute_typed(const void* src_data, void* dst_data, std::span<const int64_t> in_shape,
                   std::span<const int64_t> perm) {
  const int rank = int(in_shape.size());
  if (rank < 2 || rank > 8 || int(perm.size()) != rank) return false;
  std::array<int64_t, 8> in_stride{}, shape{}, src_stride{};
  in_stride[size_t(rank - 1)] = 1;
  for (int d = rank - 2; d >= 0; --d) in_stride[size_t(d)] = in_stride[size_t(d + 1)] * in_shape[size_t(d + 1)];
  int64_t numel = 1;
  for (int64_t s : in_shape) numel *= s;
  if (numel == 0) return true;
  for (int i = 0; i < rank; ++i) {
    shape[size_t(i)] = in_shape[size_t(perm[size_t(i)])];
    src_stride[size_t(i)] = in_stride[size_t(perm[size_t(i)])];
  }
  bool leading_identity = true;
  for (int i = 0; i + 2 < rank; ++i) leading_identity = leading_identity && perm[size_t(i)] == i;
  const auto* src = static_cast<const T*>(src_data);
  auto* dst = static_cast<T*>(dst_data);
  if (perm[size_t(rank - 1)] == rank - 1) {
    // Rows of the last dim stay contiguous: one memcpy per output row.
    const int64_t row = shape[size_t(rank - 1)], rows = numel / row;
    parallel_for(rows, rows * row >= 65536 ? 1 : rows, [&](int64_t r0, int64_t r1) {
      std::array<int64_t, 8> idx{};
      int64_t rem = r0;
      for (int d = rank - 2; d >= 0; --d) idx[size_t(d)] = rem % shape[size_t(d)], rem /= shape[size_t(d)];
      for (int64_t r = r0; r < r1; ++r) {
        int64_t off = 0;
        for (int d = 0; d < rank - 1; ++d) off += idx[size_t(d)] * src_stride[size_t(d)];
        std::memcpy(dst + r * row, src + off, size_t(row) * sizeof(T));
        for (int d = rank - 2; d >= 0; --d) {
          if (++idx[size_t(d)] < shape[size_t(d)]) break;
          idx[size_t(d)] = 0;
        }
      }
    });
    return true;
  }
  if (leading_identity) {
    // [..., R, C] -> [..., C, R]
    const int64_t rows = in_shape[size_t(rank - 2)], cols = in_shape[size_t(rank - 1)], batch = numel / (rows * cols);
    parallel_for(batch, batch * rows * cols >= 65536 ? 1 : batch, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) transpose_2d(src + b * rows * cols, dst + b * rows * cols, rows, cols);
    });
    return true;
  }
  return false;
}

}  // namespace

bool permute_4byte(const void* src, void* dst, std::span<const int64_t> in_shape, std::span<const int64_t> perm) {
  return permute_typed<uint32_t>(src, dst, in_shape, perm);
}

// [self, dims, out, ret]
Status permute_copy_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 4 || !args[0]->is_tensor() || !args[2]->is_tensor()) return kernels::PermuteCopyOut(ctx, args);
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[2]->tensor;
  std::vector<int64_t> dims;
  const int rank = self.dim();
  if (!rt::arg_int_list(args[1], "dims", &dims) || int(dims.size()) != rank || rank < 2 || rank > 8 ||
      self.dtype() != out.dtype() || (element_size(self.dtype()) != 4 && element_size(self.dtype()) != 2) ||
      !self.is_contiguous() ||
      self.raw_data() == nullptr) {
    return kernels::PermuteCopyOut(ctx, args);
  }
  std::array<int64_t, 8> shape{};
  uint32_t seen = 0;
  for (int i = 0; i < rank; ++i) {
    int64_t d = dims[size_t(i)] < 0 ? dims[size_t(i)] + rank : dims[size_t(i)];
    if (d < 0 || d >= rank || (seen & (1u << d))) return kernels::PermuteCopyOut(ctx, args);
    seen |= 1u << d;
    dims[size_t(i)] = d;
    shape[size_t(i)] = self.size(int(d));
  }
  if (!out.resize(std::span<const int64_t>(shape.data(), size_t(rank))) || !out.is_contiguous()) {
    return kernels::PermuteCopyOut(ctx, args);
  }
  const bool done = element_size(self.dtype()) == 4 ? permute_typed<uint32_t>(self.raw_data(), out.raw_data(), self.sizes(), dims)
                                                    : permute_typed<uint16_t>(self.raw_data(), out.raw_data(), self.sizes(), dims);
  if (!done) return kernels::PermuteCopyOut(ctx, args);
  if (args[3] != args[2]) *args[3] = *args[2];
  return Status::ok();
}

}  // namespace hf2pte::kernels
