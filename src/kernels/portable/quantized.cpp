// Upstream's quantized kernel library (kernels/quantized, namespace
// quantized_decomposed) as the portable backend and the reference interpreter
// run it: per-token dynamic activation quantization, the weight-only mixed
// linear, and the 8-/4-bit embeddings (docs/quantization.md). The arithmetic
// follows upstream's kernels (scales in float64 for the per-token ops, the
// zero point chosen from the nearer end), so an upstream runtime gives the same
// numbers; on the fixtures' inputs that equals torchao's formula.
#include <algorithm>
#include <cmath>

#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"
#include "quant/per_token_qparams.h"
#include "quant/quant.h"

namespace hf2pte::kernels {

namespace {

Status expect_dtype(const rt::Tensor& t, ScalarType want, OpId op, std::string_view what) {
  HF2PTE_CHECK_OR_RETURN(t.dtype() == want, kInvalidArgument, "{}: {} must be {}; got {}", op_key(op), what,
                         scalar_type_name(want), scalar_type_name(t.dtype()));
  return Status::ok();
}

Status expect_contiguous(const rt::Tensor& t, OpId op, std::string_view what) {
  HF2PTE_CHECK_OR_RETURN(t.is_contiguous(), kNotSupported, "{}: {} must be contiguous", op_key(op), what);
  return Status::ok();
}

/// Rows of the last dim ("tokens") of `x`.
int64_t token_count(const rt::Tensor& x) { return x.dim() == 0 ? 1 : x.numel() / std::max<int64_t>(x.size(-1), 1); }

Status expect_per_token_params(const rt::Tensor& x, const rt::Tensor& scale, const rt::Tensor& zp, OpId op) {
  HF2PTE_RETURN_IF_ERROR(expect_dtype(scale, ScalarType::kDouble, op, "scales"));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(zp, ScalarType::kLong, op, "zero_points"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(scale, op, "scales"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(zp, op, "zero_points"));
  const int64_t tokens = token_count(x);
  HF2PTE_CHECK_OR_RETURN(scale.numel() == tokens && zp.numel() == tokens, kInvalidArgument,
                         "{}: {} tokens but {} scales and {} zero points", op_key(op), tokens, scale.numel(),
                         zp.numel());
  return Status::ok();
}

Status expect_int_range(int64_t qmin, int64_t qmax, int64_t lo, int64_t hi, OpId op) {
  HF2PTE_CHECK_OR_RETURN(qmin < qmax && qmin >= lo && qmax <= hi, kInvalidArgument,
                         "{}: quant range [{}, {}] outside [{}, {}]", op_key(op), qmin, qmax, lo, hi);
  return Status::ok();
}

/// The checked operands of quantize_per_token / dequantize_per_token: input,
/// per-token scales and zero points, the int8 range, and the out resized to the
/// input's shape (`in` / `out_t` their element types).
struct PerTokenOperands {
  rt::Tensor *x, *scale, *zp, *out;
  int64_t qmin, qmax, n, tokens;
};
Result<PerTokenOperands> per_token_operands(const ArgReader& r, OpId op, size_t out_index, ScalarType in,
                                            ScalarType out_t) {
  PerTokenOperands p{};
  HF2PTE_ASSIGN_OR_RETURN(p.x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(p.scale, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(p.zp, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(p.qmin, r.int_arg(3));
  HF2PTE_ASSIGN_OR_RETURN(p.qmax, r.int_arg(4));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dtype, r.int_arg(5));
  HF2PTE_ASSIGN_OR_RETURN(p.out, r.tensor(out_index));
  HF2PTE_CHECK_OR_RETURN(dtype == int64_t(ScalarType::kChar), kNotSupported, "{}: dtype {}; only int8", op_key(op),
                         dtype);
  HF2PTE_RETURN_IF_ERROR(expect_int_range(p.qmin, p.qmax, -128, 127, op));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*p.x, in, op, "input"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(*p.x, op, "input"));
  HF2PTE_RETURN_IF_ERROR(expect_per_token_params(*p.x, *p.scale, *p.zp, op));
  HF2PTE_RETURN_IF_ERROR(resize_out(*p.out, p.x->sizes(), op));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*p.out, out_t, op, "out"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(*p.out, op, "out"));
  p.n = p.x->dim() == 0 ? 1 : p.x->size(-1);
  p.tokens = token_count(*p.x);
  return p;
}

/// One token's range (widened to include 0), then upstream's parameters.
void per_token_params(const float* x, int64_t n, double* scale, int64_t* zero_point) {
  float mn = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  quant::per_token_qparams(mn, mx, scale, zero_point);
}

}  // namespace

Status ChooseQparamsPerTokenAsymmetricOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ChooseQparamsPerTokenAsymmetricOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dtype, r.int_arg(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * scale, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * zp, r.tensor(3));
  HF2PTE_CHECK_OR_RETURN(dtype == int64_t(ScalarType::kChar), kNotSupported, "{}: dtype {}; only int8", op_key(op),
                         dtype);
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*x, ScalarType::kFloat, op, "input"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(*x, op, "input"));
  HF2PTE_CHECK_OR_RETURN(x->dim() >= 1, kInvalidArgument, "{}: input must have rank >= 1", op_key(op));
  std::vector<int64_t> shape(x->sizes().begin(), x->sizes().end());
  shape.back() = 1;
  HF2PTE_RETURN_IF_ERROR(resize_out(*scale, shape, op));
  HF2PTE_RETURN_IF_ERROR(resize_out(*zp, shape, op));
  HF2PTE_RETURN_IF_ERROR(expect_per_token_params(*x, *scale, *zp, op));
  const int64_t n = x->size(-1), tokens = token_count(*x);
  for (int64_t t = 0; t < tokens; ++t) {
    per_token_params(x->data<float>() + t * n, n, scale->data<double>() + t, zp->data<int64_t>() + t);
  }
  return Status::ok();
}

Status QuantizePerTokenOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::QuantizePerTokenOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(auto p, per_token_operands(r, op, 6, ScalarType::kFloat, ScalarType::kChar));
  for (int64_t t = 0; t < p.tokens; ++t) {
    // quantize_val: inv_scale = 1.0f / float(scale), q = zp + round(inv_scale * x).
    const float inv = 1.0f / float(p.scale->data<double>()[t]);
    const int64_t z = p.zp->data<int64_t>()[t];
    const float* in = p.x->data<float>() + t * p.n;
    int8_t* o = p.out->data<int8_t>() + t * p.n;
    for (int64_t i = 0; i < p.n; ++i) {
      const int64_t q = int64_t(int32_t(z) + std::nearbyint(inv * in[i]));
      o[i] = int8_t(std::clamp(q, p.qmin, p.qmax));
    }
  }
  r.set_return(6);
  return Status::ok();
}

Status DequantizePerTokenOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::DequantizePerTokenOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(int64_t out_dtype, r.int_arg(6));
  HF2PTE_CHECK_OR_RETURN(out_dtype == int64_t(ScalarType::kFloat), kNotSupported, "{}: output_dtype {}; only float32",
                         op_key(op), out_dtype);
  HF2PTE_ASSIGN_OR_RETURN(auto p, per_token_operands(r, op, 7, ScalarType::kChar, ScalarType::kFloat));
  for (int64_t t = 0; t < p.tokens; ++t) {
    const float s = float(p.scale->data<double>()[t]);
    const int32_t z = int32_t(p.zp->data<int64_t>()[t]);
    const int8_t* in = p.x->data<int8_t>() + t * p.n;
    float* o = p.out->data<float>() + t * p.n;
    for (int64_t i = 0; i < p.n; ++i) o[i] = float(int32_t(in[i]) - z) * s;
  }
  r.set_return(7);
  return Status::ok();
}

// out[m, n] = Σ_g scale[n, g] · Σ_{k in g} in[m, k] · w[n, k] (zero points None).
Status MixedLinearOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::MixedLinearOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * scales, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * zps, r.opt_tensor(3));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> dtype, r.opt_int(4));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(5));
  HF2PTE_CHECK_OR_RETURN(zps == nullptr, kNotSupported, "{}: weight zero points are not supported", op_key(op));
  HF2PTE_CHECK_OR_RETURN(!dtype || *dtype == int64_t(ScalarType::kFloat), kNotSupported, "{}: dtype {}; only float32",
                         op_key(op), *dtype);
  HF2PTE_CHECK_OR_RETURN(x->dim() == 2 && w->dim() == 2 && (scales->dim() == 1 || scales->dim() == 2), kInvalidArgument,
                         "{}: input {} and weight {} must be 2-D, scales {} 1-D or 2-D", op_key(op),
                         format_shape(x->sizes()), format_shape(w->sizes()), format_shape(scales->sizes()));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*x, ScalarType::kFloat, op, "input"));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*w, ScalarType::kChar, op, "weight"));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*scales, ScalarType::kFloat, op, "weight_scales"));
  for (auto* t : {x, w, scales}) HF2PTE_RETURN_IF_ERROR(expect_contiguous(*t, op, "operands"));
  const int64_t M = x->size(0), K = x->size(1), N = w->size(0);
  const int64_t G = scales->dim() == 2 ? scales->size(1) : 1;
  HF2PTE_CHECK_OR_RETURN(w->size(1) == K && scales->size(0) == N && G >= 1 && K % G == 0, kInvalidArgument,
                         "{}: input {} x weight {} with scales {}", op_key(op), format_shape(x->sizes()),
                         format_shape(w->sizes()), format_shape(scales->sizes()));
  const std::vector<int64_t> shape = {M, N};
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*out, ScalarType::kFloat, op, "out"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(*out, op, "out"));
  // Upstream's order (vec_quantized_matmul_transb_int8): per group, Σ x·w in
  // float, times the group's scale, summed over the groups.
  const int64_t gs = K / G;
  const float* px = x->data<float>();
  const int8_t* pw = w->data<int8_t>();
  const float* ps = scales->data<float>();
  float* po = out->data<float>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; k += gs) {
        float psum = 0.0f;
        for (int64_t k2 = k; k2 < k + gs; ++k2) psum += px[m * K + k2] * float(pw[n * K + k2]);
        sum += psum * ps[n * G + k / gs];
      }
      po[m * N + n] = sum;
    }
  }
  r.set_return(5);
  return Status::ok();
}

namespace {

// embedding_byte / embedding_4bit: out[..., j] = (q(index, j) - zp) · scale[index, j / group].
Status embedding_xbit(std::span<rt::EValue*> args, OpId op, int bits) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * scales, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * zps, r.opt_tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(int64_t qmin, r.int_arg(3));
  HF2PTE_ASSIGN_OR_RETURN(int64_t qmax, r.int_arg(4));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * indices, r.tensor(5));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(6));
  (void)qmin;  // metadata only, as upstream's kernels treat it
  (void)qmax;
  HF2PTE_CHECK_OR_RETURN(w->dim() == 2 && (scales->dim() == 1 || scales->dim() == 2), kInvalidArgument,
                         "{}: weight {} must be 2-D and scales {} 1-D or 2-D", op_key(op), format_shape(w->sizes()),
                         format_shape(scales->sizes()));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*w, bits == 8 ? ScalarType::kChar : ScalarType::kByte, op, "weight"));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*scales, ScalarType::kFloat, op, "weight_scales"));
  for (auto* t : {w, scales, indices}) HF2PTE_RETURN_IF_ERROR(expect_contiguous(*t, op, "operands"));
  if (zps != nullptr) {
    HF2PTE_RETURN_IF_ERROR(expect_dtype(*zps, ScalarType::kFloat, op, "weight_zero_points"));
    HF2PTE_RETURN_IF_ERROR(expect_contiguous(*zps, op, "weight_zero_points"));
    HF2PTE_CHECK_OR_RETURN(zps->numel() == scales->numel(), kInvalidArgument, "{}: {} zero points for {} scales",
                           op_key(op), zps->numel(), scales->numel());
  }
  HF2PTE_CHECK_OR_RETURN(indices->dtype() == ScalarType::kLong || indices->dtype() == ScalarType::kInt,
                         kInvalidArgument, "{}: indices must be int64 or int32", op_key(op));
  const int64_t rows = w->size(0), dim = w->size(1) * (8 / bits);
  const int64_t G = scales->dim() == 2 ? scales->size(1) : 1;
  HF2PTE_CHECK_OR_RETURN(scales->size(0) == rows && G >= 1 && dim % G == 0, kInvalidArgument,
                         "{}: scales {} for weight {}", op_key(op), format_shape(scales->sizes()),
                         format_shape(w->sizes()));
  const int64_t count = indices->numel();
  auto index_at = [&](int64_t i) {
    return indices->dtype() == ScalarType::kLong ? indices->data<int64_t>()[i] : int64_t(indices->data<int32_t>()[i]);
  };
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = index_at(i);
    HF2PTE_CHECK_OR_RETURN(v >= 0 && v < rows, kOutOfRange, "{}: index {} out of range; expected in [0, {})",
                           op_key(op), v, rows);
  }
  HF2PTE_CHECK_OR_RETURN(indices->dim() < kMaxTensorRank, kNotSupported, "{}: indices of rank {}", op_key(op),
                         indices->dim());
  std::vector<int64_t> shape(indices->sizes().begin(), indices->sizes().end());
  shape.push_back(dim);
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  HF2PTE_RETURN_IF_ERROR(expect_dtype(*out, ScalarType::kFloat, op, "out"));
  HF2PTE_RETURN_IF_ERROR(expect_contiguous(*out, op, "out"));
  const int64_t gs = dim / G, row_bytes = w->size(1);
  const float* ps = scales->data<float>();
  const float* pz = zps ? zps->data<float>() : nullptr;
  float* po = out->data<float>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = index_at(i);
    const uint8_t* row = w->data<uint8_t>() + v * row_bytes;
    for (int64_t j = 0; j < dim; ++j) {
      const int32_t q = bits == 8 ? int32_t(int8_t(row[j])) : quant::embedding_int4_at(row, j);
      const float zp = pz ? pz[v * G + j / gs] : 0.0f;
      po[i * dim + j] = (float(q) - zp) * ps[v * G + j / gs];
    }
  }
  r.set_return(6);
  return Status::ok();
}

}  // namespace

Status EmbeddingByteOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return embedding_xbit(args, OpId::EmbeddingByteOut, 8);
}
Status Embedding4bitOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return embedding_xbit(args, OpId::Embedding4bitOut, 4);
}

}  // namespace hf2pte::kernels
