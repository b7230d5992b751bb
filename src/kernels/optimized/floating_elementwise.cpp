// Elementwise ops on floating tensors (f32, bf16, f16, any mix the portable
// kernels accept): mul / add / sub with broadcasting, sigmoid, and the dtype
// casts of _to_dim_order_copy. The portable kernels' math, in f32 as they
// compute it (sigmoid: the SIMD exp, within a few f32 ulps of their double),
// one rounding to the out's dtype, but over SIMD-widened blocks of rows
// instead of one element at a time: what 16-bit programs spend their
// non-matmul time on (norm scales, RoPE, SiLU, residuals, the f32 islands).
// Anything else (integer dtypes, strided layouts, alpha != 1) is the portable
// kernel's.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/elementwise.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Elements per block: the f32 staging buffers stay in L1.
constexpr int64_t kBlock = 512;

/// The dtypes these loops widen from and round to (not f64).
bool f32_or_16(ScalarType t) {
  return t == ScalarType::kFloat || t == ScalarType::kBFloat16 || t == ScalarType::kHalf;
}

bool plain(const rt::Tensor& t) { return f32_or_16(t.dtype()) && t.is_contiguous() && t.raw_data() != nullptr; }

size_t elem_size(ScalarType t) { return t == ScalarType::kFloat ? 4 : 2; }

/// n elements of a floating tensor's data at element offset `at`, as f32:
/// a pointer into the data itself when it is f32, else widened into `buf`.
const float* load(ScalarType t, const void* data, int64_t at, int64_t n, float* buf) {
  const SimdKernels& k = simd();
  if (t == ScalarType::kFloat) return static_cast<const float*>(data) + at;
  const uint16_t* p = static_cast<const uint16_t*>(data) + at;
  if (t == ScalarType::kBFloat16) {
    k.bf16_to_float_row(p, buf, n);
  } else {
    k.half_to_float_row(p, buf, n);
  }
  return buf;
}

/// n f32 values into a floating tensor's data at element offset `at`, rounded once.
void store(ScalarType t, void* data, int64_t at, int64_t n, const float* v) {
  const SimdKernels& k = simd();
  if (t == ScalarType::kFloat) {
    float* p = static_cast<float*>(data) + at;
    if (p != v) std::memcpy(p, v, size_t(n) * sizeof(float));
  } else if (t == ScalarType::kBFloat16) {
    k.float_to_bf16_row(v, static_cast<uint16_t*>(data) + at, n);
  } else {
    k.float_to_half_row(v, static_cast<uint16_t*>(data) + at, n);
  }
}

/// The loop nest of a broadcast binary op after merging dims: out is
/// [outer..., inner] contiguous; operand k's element (o, j) is at
/// offset_k(o) + j * step[k], step 0 (broadcast along inner) or 1.
struct Nest {
  std::vector<int64_t> outer;                   ///< outer sizes
  std::array<std::vector<int64_t>, 2> strides;  ///< per operand, per outer dim
  int64_t inner = 1;
  std::array<int64_t, 2> step{};

  int64_t rows() const {
    int64_t r = 1;
    for (int64_t s : outer) r *= s;
    return r;
  }
  int64_t offset(int k, int64_t row) const {
    int64_t off = 0;
    for (size_t d = outer.size(); d-- > 0;) {
      off += (row % outer[d]) * strides[size_t(k)][d];
      row /= outer[d];
    }
    return off;
  }
};

/// The nest for operands a, b broadcast to `shape`; false when an operand's
/// innermost stride is neither 0 nor 1 (not a plain broadcast of a contiguous tensor).
bool make_nest(const rt::Tensor& a, const rt::Tensor& b, std::span<const int64_t> shape, Nest* nest) {
  const DimArray sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  struct Dim {
    int64_t size, sa, sb;
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1) dims.push_back({shape[d], sa[d], sb[d]});
  }
  // Merge right to left where both operands step through the pair as one dim.
  std::vector<Dim> merged;
  for (size_t i = dims.size(); i-- > 0;) {
    Dim d = dims[i];
    if (!merged.empty()) {
      Dim& in = merged.back();
      if (d.sa == in.sa * in.size && d.sb == in.sb * in.size) {
        in.size *= d.size;
        continue;
      }
    }
    merged.push_back(d);
  }
  std::reverse(merged.begin(), merged.end());
  if (merged.empty()) merged.push_back({1, 1, 1});
  const Dim& last = merged.back();
  if ((last.sa != 0 && last.sa != 1) || (last.sb != 0 && last.sb != 1)) return false;
  nest->inner = last.size;
  nest->step = {last.sa, last.sb};
  for (size_t i = 0; i + 1 < merged.size(); ++i) {
    nest->outer.push_back(merged[i].size);
    nest->strides[0].push_back(merged[i].sa);
    nest->strides[1].push_back(merged[i].sb);
  }
  return true;
}

enum class Binary : uint8_t { kMul, kAdd, kSub };

void apply(Binary op, const float* x, const float* y, float* z, int64_t n) {
  switch (op) {
    case Binary::kMul:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] * y[i];
      break;
    case Binary::kAdd:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
      break;
    case Binary::kSub:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] - y[i];
      break;
  }
}

/// One operand's block as f32: contiguous (widened or in place) or one value repeated.
const float* operand_block(const rt::Tensor& t, int64_t at, int64_t step, int64_t n, float* buf) {
  if (step == 1) return load(t.dtype(), t.raw_data(), at, n, buf);
  float one;
  const float v = *load(t.dtype(), t.raw_data(), at, 1, &one);
  std::fill(buf, buf + n, v);
  return buf;
}

/// out = a (op) b on floating tensors; false (nothing written) when the fast
/// path does not apply. args: [self, other, (alpha,) out, ret].
bool binary_fast(Binary op, std::span<rt::EValue*> args, size_t out_at, OpId id) {
  if (args.size() != out_at + 2 || !args[0]->is_tensor() || !args[1]->is_tensor() || !args[out_at]->is_tensor()) {
    return false;
  }
  if (out_at == 3 && (!args[2]->is_scalar() || args[2]->scalar_as_double() != 1.0)) return false;
  const rt::Tensor &a = *args[0]->tensor, &b = *args[1]->tensor;
  rt::Tensor& out = *args[out_at]->tensor;
  if (!plain(a) || !plain(b) || !f32_or_16(out.dtype())) return false;
  std::vector<int64_t> shape;
  const std::span<const int64_t> shapes[] = {a.sizes(), b.sizes()};
  if (!broadcast_shapes(shapes, id, &shape).is_ok()) return false;  // the portable kernel reports it
  Nest nest;
  if (!make_nest(a, b, shape, &nest)) return false;
  // A failed resize is the portable kernel's to report.
  if (!out.resize(shape).is_ok() || !out.is_contiguous() || out.raw_data() == nullptr) return false;
  const int64_t rows = nest.rows(), inner = nest.inner;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(inner, 1));
  parallel_for(rows, rows * inner >= (int64_t(1) << 16) ? grain : rows, [&](int64_t r0, int64_t r1) {
    float xa[kBlock], xb[kBlock], z[kBlock];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t oa = nest.offset(0, r), ob = nest.offset(1, r);
      for (int64_t j = 0; j < inner; j += kBlock) {
        const int64_t n = std::min(kBlock, inner - j);
        const float* x = operand_block(a, oa + j * nest.step[0], nest.step[0], n, xa);
        const float* y = operand_block(b, ob + j * nest.step[1], nest.step[1], n, xb);
        apply(op, x, y, z, n);
        store(out.dtype(), out.raw_data(), r * inner + j, n, z);
      }
    }
  });
  return true;
}

Status binary(Binary op, std::span<rt::EValue*> args, size_t out_at, OpId id, PortableKernelFn portable,
              rt::KernelContext& ctx) {
  if (!binary_fast(op, args, out_at, id)) return portable(ctx, args);
  if (args[out_at + 1] != args[out_at]) *args[out_at + 1] = *args[out_at];
  return Status::ok();
}

/// Block-wise out = f(x) over two same-shape contiguous floating tensors.
template <typename Fn>
void map_blocks(const rt::Tensor& x, rt::Tensor& out, Fn fn) {
  const int64_t n = x.numel();
  parallel_for(n, n >= (int64_t(1) << 16) ? (int64_t(1) << 14) : n, [&](int64_t i0, int64_t i1) {
    float buf[kBlock], z[kBlock];
    for (int64_t i = i0; i < i1; i += kBlock) {
      const int64_t m = std::min(kBlock, i1 - i);
      const float* v = load(x.dtype(), x.raw_data(), i, m, buf);
      store(out.dtype(), out.raw_data(), i, m, fn(v, z, m));
    }
  });
}

}  // namespace

// [self, other, alpha, out, ret]
Status add_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  return binary(Binary::kAdd, args, 3, OpId::AddOut, kernels::AddOut, ctx);
}

// [self, other, alpha, out, ret]
Status sub_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  return binary(Binary::kSub, args, 3, OpId::SubOut, kernels::SubOut, ctx);
}

// [self, other, out, ret]
Status mul_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  return binary(Binary::kMul, args, 2, OpId::MulOut, kernels::MulOut, ctx);
}

// [self, out, ret]
Status sigmoid_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 3 || !args[0]->is_tensor() || !args[1]->is_tensor() || !plain(*args[0]->tensor) ||
      !f32_or_16(args[1]->tensor->dtype()) || !args[1]->tensor->resize(args[0]->tensor->sizes()).is_ok() ||
      !args[1]->tensor->is_contiguous() || args[1]->tensor->raw_data() == nullptr) {
    return kernels::SigmoidOut(ctx, args);
  }
  const SimdKernels& k = simd();
  map_blocks(*args[0]->tensor, *args[1]->tensor, [&](const float* v, float* z, int64_t m) {
    k.sigmoid_row(v, z, m);
    return z;
  });
  if (args[2] != args[1]) *args[2] = *args[1];
  return Status::ok();
}

// [self, non_blocking, dim_order, out, ret]: contiguous casts between floating dtypes.
Status to_dim_order_copy_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[3]->is_tensor() || !args[2]->is_none()) {
    return kernels::ToDimOrderCopyOut(ctx, args);
  }
  const rt::Tensor& x = *args[0]->tensor;
  rt::Tensor& out = *args[3]->tensor;
  if (!plain(x) || !f32_or_16(out.dtype()) || !is_contiguous_dim_order(out.dim_order()) ||
      !out.resize(x.sizes()).is_ok() || !out.is_contiguous() || out.raw_data() == nullptr) {
    return kernels::ToDimOrderCopyOut(ctx, args);
  }
  if (x.dtype() == out.dtype()) {
    if (out.raw_data() != x.raw_data()) std::memcpy(out.raw_data(), x.raw_data(), size_t(x.numel()) * elem_size(x.dtype()));
  } else {
    map_blocks(x, out, [](const float* v, float*, int64_t) { return v; });
  }
  if (args[4] != args[3]) *args[4] = *args[3];
  return Status::ok();
}

}  // namespace hf2pte::kernels
