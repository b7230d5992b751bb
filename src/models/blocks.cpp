#include "models/blocks.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include <fmt/format.h>

namespace hf2pte::models {

using graph::IntList;
using graph::None;

Result<graph::TensorSource> BlockBuilder::source(const TensorRef& t) {
  graph::TensorSource s;
  s.name = t.name;
  s.dtype = t.dtype;
  s.shape = t.shape;
  s.bytes = t.bytes;
  s.owner = t.storage;
  s.file_mapped = t.storage != nullptr && t.storage->is_mapped();
  return s;
}

std::string BlockBuilder::resolve(const std::string& name) const {
  const auto& prefix = layout_.optional_prefix;
  if (!prefix.empty() && name.starts_with(prefix) && !ckpt_.has(name)) {
    std::string stripped = name.substr(prefix.size());
    if (ckpt_.has(stripped)) return stripped;
  }
  return name;
}

Result<ValueId> BlockBuilder::weight(const std::string& name, const std::vector<int64_t>& shape,
                                     std::optional<ScalarType> dtype) {
  HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(resolve(name), DTypeSet::float_weights(), shape));
  HF2PTE_ASSIGN_OR_RETURN(graph::TensorSource src, source(t));
  graph::ConstantRecipe r;
  r.source = std::move(src);
  r.dtype = dtype.value_or(dtype_);
  return g_.add_constant(name, graph::make_constant(r));
}

Result<ValueId> BlockBuilder::weight_view(const std::string& name, const std::vector<int64_t>& shape,
                                          const WeightView& view, const std::string& label) {
  HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(resolve(name), DTypeSet::float_weights(), shape));
  graph::ConstantRecipe r;
  HF2PTE_ASSIGN_OR_RETURN(r.source, source(t));
  r.row_width = view.row_width;
  r.row_begin = view.row_begin;
  r.row_end = view.row_end;
  r.rows = view.rows;
  r.cols = view.cols;
  r.transpose = view.transpose;
  r.sizes = view.sizes;
  r.map = view.map;
  r.dtype = view.dtype.value_or(dtype_);
  return g_.add_constant(name + "." + label, graph::make_constant(r));
}

namespace {

std::vector<double> to_doubles(const TensorRef& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    const uint8_t* p = t.bytes.data() + i * element_size(t.dtype);
    uint16_t h = 0;
    float f = 0;
    switch (t.dtype) {
      case ScalarType::kBFloat16: std::memcpy(&h, p, 2); v[i] = bf16_to_float(h); break;
      case ScalarType::kHalf: std::memcpy(&h, p, 2); v[i] = half_to_float(h); break;
      default: std::memcpy(&f, p, 4); v[i] = f; break;
    }
  }
  return v;
}

}  // namespace

Result<ValueId> BlockBuilder::cast(ValueId x, ScalarType dtype, const std::string& name) {
  if (g_.type(x).dtype == dtype) return x;
  return op(OpId::ToCopy, {x, dtype}, name);
}

Result<LinearWeights> BlockBuilder::conv_bn_folded(const std::string& conv, const std::vector<int64_t>& shape,
                                                   bool conv_bias, const std::string& bn, double eps) {
  const int64_t out = shape[0];
  auto read = [&](const std::string& name, const std::vector<int64_t>& s) -> Result<std::vector<double>> {
    HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(resolve(name), DTypeSet::float_weights(), s));
    return to_doubles(t);
  };
  HF2PTE_ASSIGN_OR_RETURN(auto w, read(conv + ".weight", shape));
  std::vector<double> b(static_cast<size_t>(out), 0.0);
  if (conv_bias) {
    HF2PTE_ASSIGN_OR_RETURN(b, read(conv + ".bias", {out}));
  }
  HF2PTE_ASSIGN_OR_RETURN(auto gamma, read(bn + ".weight", {out}));
  HF2PTE_ASSIGN_OR_RETURN(auto beta, read(bn + ".bias", {out}));
  HF2PTE_ASSIGN_OR_RETURN(auto mean, read(bn + ".running_mean", {out}));
  HF2PTE_ASSIGN_OR_RETURN(auto var, read(bn + ".running_var", {out}));
  ckpt_.mark_ignored(resolve(bn + ".num_batches_tracked"));
  const size_t per_out = w.size() / size_t(out);
  std::vector<float> wf(w.size()), bf(static_cast<size_t>(out));
  for (size_t o = 0; o < size_t(out); ++o) {
    HF2PTE_CHECK_OR_RETURN(var[o] + eps > 0, kInvalidInput, "{}.running_var[{}] = {} makes var + eps <= 0", bn, o, var[o]);
    const double scale = gamma[o] / std::sqrt(var[o] + eps);
    for (size_t i = 0; i < per_out; ++i) wf[o * per_out + i] = float(w[o * per_out + i] * scale);
    bf[o] = float(beta[o] + (b[o] - mean[o]) * scale);
  }
  LinearWeights r;
  if (dtype_ != ScalarType::kFloat) {  // a 16-bit model: the folded f32 values rounded once to its dtype
    r.weight = g_.add_constant(conv + ".weight+bn",
                               graph::ConstantData::from_values(dtype_, shape, std::vector<double>(wf.begin(), wf.end()),
                                                                conv + ".weight with " + bn + " folded"));
    r.bias = g_.add_constant(conv + ".bias+bn",
                             graph::ConstantData::from_values(dtype_, {out}, std::vector<double>(bf.begin(), bf.end()),
                                                              bn + " folded into " + conv));
    return r;
  }
  r.weight = g_.add_constant(conv + ".weight+bn", graph::ConstantData::from_bytes(ScalarType::kFloat, shape, to_bytes(wf),
                                                                                 conv + ".weight with " + bn + " folded"));
  r.bias = g_.add_constant(conv + ".bias+bn", graph::ConstantData::from_bytes(ScalarType::kFloat, {out}, to_bytes(bf),
                                                                             bn + " folded into " + conv));
  return r;
}

Result<std::vector<ValueId>> BlockBuilder::split_rows(const std::string& name, const std::vector<int64_t>& shape,
                                                      const std::vector<int64_t>& row_counts) {
  HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(resolve(name), DTypeSet::float_weights(), shape));
  HF2PTE_ASSIGN_OR_RETURN(graph::TensorSource src, source(t));
  std::vector<ValueId> out;
  int64_t begin = 0;
  for (size_t i = 0; i < row_counts.size(); ++i) {
    graph::ConstantRecipe r;
    r.source = src;
    r.row_begin = begin;
    r.row_end = begin + row_counts[i];
    r.dtype = dtype_;
    begin = r.row_end;
    out.push_back(g_.add_constant(fmt::format("{}.{}", name, i), graph::make_constant(r)));
  }
  return out;
}

Result<LinearWeights> BlockBuilder::linear_weights(const std::string& prefix, int64_t out, int64_t in, bool bias) {
  LinearWeights w;
  if (layout_.linear_in_out) {
    // Conv1D [in, out]: streamed transposed into the [out, in] a linear expects
    // (and back again for free when linear_to_mm asks for W^T).
    const std::string name = resolve(prefix + ".weight");
    HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(name, DTypeSet::float_weights(), {in, out}));
    graph::ConstantRecipe r;
    HF2PTE_ASSIGN_OR_RETURN(r.source, source(t));
    r.transpose = true;
    r.dtype = dtype_;
    w.weight = g_.add_constant(name, graph::make_constant(r));
  } else {
    HF2PTE_ASSIGN_OR_RETURN(w.weight, weight(prefix + ".weight", {out, in}));
  }
  if (bias) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId b, weight(prefix + ".bias", {out}));
    w.bias = b;
  }
  return w;
}

Result<ValueId> BlockBuilder::linear(ValueId x, const LinearWeights& w, const std::string& name) {
  graph::Arg bias = w.bias ? graph::Arg{*w.bias} : graph::Arg{None{}};
  return g_.add(OpId::Linear, {x, w.weight, bias}, name);
}

Result<ValueId> BlockBuilder::rms_norm(ValueId x, ValueId weight, double eps, const std::string& name) {
  IntList normalized{g_.type(x).sizes.back()};
  return g_.add(OpId::RmsNorm, {x, normalized, weight, eps}, name);
}

ValueId BlockBuilder::scalar(ScalarType dtype, double value, const std::string& name) {
  return g_.add_constant(name, graph::ConstantData::scalar(dtype, value));
}

Result<NormWeights> BlockBuilder::norm_weights(const std::string& weight_name, int64_t size, NormKind kind) {
  NormWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.weight, weight(weight_name, {size}));
  if (kind == NormKind::kLayerNorm) {
    // "x.weight" -> "x.bias": LayerNorm always carries both.
    std::string bias = weight_name.ends_with(".weight") ? weight_name.substr(0, weight_name.size() - 7) + ".bias"
                                                        : weight_name + ".bias";
    HF2PTE_ASSIGN_OR_RETURN(ValueId b, weight(bias, {size}));
    w.bias = b;
  }
  return w;
}

Result<ValueId> BlockBuilder::norm(ValueId x, const NormWeights& w, const NormOptions& o, const std::string& name) {
  switch (o.kind) {
    case NormKind::kRms:
      return rms_norm(x, w.weight, o.eps, name);
    case NormKind::kRmsOnePlus: {
      // Gemma stores w with the 1 subtracted: the scale is (1 + w), added in float32 as HF
      // does (w.float() for 16-bit models, whose normed x is then scaled in f32 too).
      ValueId w32 = w.weight;
      if (g_.type(w32).dtype != ScalarType::kFloat) {
        HF2PTE_ASSIGN_OR_RETURN(w32, op(OpId::ToCopy, {w32, ScalarType::kFloat}, name + ".w_f32"));
      }
      HF2PTE_ASSIGN_OR_RETURN(ValueId w1, op(OpId::AddScalarOut, {w32, 1.0}, name + ".one_plus_w"));
      return rms_norm(x, w1, o.eps, name);
    }
    case NormKind::kLayerNorm: {
      // (x - mean) * rsqrt(mean((x - mean)^2) + eps) * w + b, the biased variance of nn.LayerNorm.
      // A 16-bit x is normalised in f32 (ATen's CPU layer_norm accumulates in f32)
      // and cast back before the affine part.
      IntList last{-1};
      const ScalarType dt = g_.type(x).dtype;
      if (dt != ScalarType::kFloat) { HF2PTE_ASSIGN_OR_RETURN(x, op(OpId::ToCopy, {x, ScalarType::kFloat}, name + ".f32")); }
      HF2PTE_ASSIGN_OR_RETURN(ValueId mu, op(OpId::MeanOut, {x, last, true}, name + ".mean"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId xc, op(OpId::SubOut, {x, mu}, name + ".centered"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId sq, op(OpId::PowTensorScalarOut, {xc, 2.0}, name + ".sq"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId var, op(OpId::MeanOut, {sq, last, true}, name + ".var"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId ve, op(OpId::AddScalarOut, {var, o.eps}, name + ".var_eps"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId r, op(OpId::RsqrtOut, {ve}, name + ".rstd"));
      HF2PTE_ASSIGN_OR_RETURN(ValueId y, op(OpId::MulOut, {xc, r}, name + ".normed"));
      if (dt != ScalarType::kFloat) { HF2PTE_ASSIGN_OR_RETURN(y, op(OpId::ToCopy, {y, dt}, name + ".normed_cast")); }
      HF2PTE_ASSIGN_OR_RETURN(y, op(OpId::MulOut, {y, w.weight}, name + (w.bias ? ".scaled" : "")));
      if (w.bias) return op(OpId::AddOut, {y, *w.bias}, name);
      return y;
    }
  }
  return make_error(ErrorCode::kInternal, "unknown norm kind");
}

Result<ValueId> BlockBuilder::activation(ValueId x, std::string_view act, const std::string& name) {
  if (act == "silu" || act == "swish") return op(OpId::Silu, {x}, name);
  if (act == "gelu") {
    // Exact GELU: 0.5 x (1 + erf(x / sqrt(2))).
    HF2PTE_ASSIGN_OR_RETURN(ValueId t, op(OpId::MulScalarOut, {x, std::numbers::sqrt2 / 2}, name + ".scaled"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId e, op(OpId::ErfOut, {t}, name + ".erf"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId e1, op(OpId::AddScalarOut, {e, 1.0}, name + ".one_plus"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId h, op(OpId::MulScalarOut, {x, 0.5}, name + ".half"));
    return op(OpId::MulOut, {h, e1}, name);
  }
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") {
    // Tanh GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); both names are this formula.
    HF2PTE_ASSIGN_OR_RETURN(ValueId x3, op(OpId::PowTensorScalarOut, {x, 3.0}, name + ".cube"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId c, op(OpId::MulScalarOut, {x3, 0.044715}, name + ".cube_scaled"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId in, op(OpId::AddOut, {x, c}, name + ".inner"));
    HF2PTE_ASSIGN_OR_RETURN(in, op(OpId::MulScalarOut, {in, std::sqrt(2.0 / std::numbers::pi)}, name + ".inner_scaled"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId t, op(OpId::TanhOut, {in}, name + ".tanh"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId t1, op(OpId::AddScalarOut, {t, 1.0}, name + ".one_plus"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId h, op(OpId::MulScalarOut, {x, 0.5}, name + ".half"));
    return op(OpId::MulOut, {h, t1}, name);
  }
  return make_error(ErrorCode::kNotSupported,
                    "config.json: activation '{}' is not supported; expected silu, gelu, gelu_pytorch_tanh or gelu_new",
                    act);
}

Result<ValueId> BlockBuilder::last_position(ValueId x, const SymInt& S) {
  return op(OpId::SliceCopyTensorOut, {x, int64_t{-2}, S - SymInt(1), S}, "last_position");
}

Result<ValueId> BlockBuilder::softcap(ValueId x, double cap, const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId s, op(OpId::MulScalarOut, {x, 1.0 / cap}, name + ".div_cap"));
  HF2PTE_ASSIGN_OR_RETURN(s, op(OpId::TanhOut, {s}, name + ".tanh"));
  return op(OpId::MulScalarOut, {s, cap}, name);
}

Result<ValueId> BlockBuilder::rope(ValueId x, ValueId cos, ValueId sin, const std::string& name) {
  const int64_t d = g_.type(x).sizes.back().constant_value();
  const int64_t rd = g_.type(cos).sizes.back().constant_value();
  if (rd < d) {
    // Partial rotary (Phi, GPT-NeoX): rotate the first rd dims, pass the rest through.
    HF2PTE_ASSIGN_OR_RETURN(ValueId xr, op(OpId::SliceCopyTensorOut, {x, int64_t{-1}, SymInt(0), SymInt(rd)}, name + ".rot_part"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId xp, op(OpId::SliceCopyTensorOut, {x, int64_t{-1}, SymInt(rd), SymInt(d)}, name + ".pass_part"));
    HF2PTE_ASSIGN_OR_RETURN(xr, rope(xr, cos, sin, name + ".partial"));
    return op(OpId::CatOut, {graph::TensorList{xr, xp}, int64_t{-1}}, name);
  }
  // out = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])
  int64_t half = d / 2;
  HF2PTE_ASSIGN_OR_RETURN(ValueId x1, op(OpId::SliceCopyTensorOut, {x, int64_t{-1}, SymInt(0), SymInt(half)}, name + ".x1"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x2, op(OpId::SliceCopyTensorOut, {x, int64_t{-1}, SymInt(half), SymInt(2 * half)}, name + ".x2"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId nx2, op(OpId::NegOut, {x2}, name + ".neg"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rot, op(OpId::CatOut, {graph::TensorList{nx2, x1}, int64_t{-1}}, name + ".rot"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId xc, op(OpId::MulOut, {x, cos}, name + ".xcos"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rs, op(OpId::MulOut, {rot, sin}, name + ".rsin"));
  return op(OpId::AddOut, {xc, rs}, name);
}

Result<ValueId> BlockBuilder::heads_of(ValueId x, const LinearWeights& w, int64_t heads, int64_t head_dim,
                                       const std::string& name) {
  const SymInt S = g_.type(x).sizes[0];
  HF2PTE_ASSIGN_OR_RETURN(ValueId t, linear(x, w, name + "_proj"));
  HF2PTE_ASSIGN_OR_RETURN(t, op(OpId::ViewCopyOut, {t, IntList{S, heads, head_dim}}, name + "_heads"));
  return op(OpId::PermuteCopyOut, {t, IntList{1, 0, 2}}, name + "_t");
}

Result<ValueId> BlockBuilder::merge_heads(ValueId a, const std::string& name) {
  const auto s = g_.type(a).sizes;
  HF2PTE_ASSIGN_OR_RETURN(a, op(OpId::PermuteCopyOut, {a, IntList{1, 0, 2}}, name + ".out_t"));
  return op(OpId::ViewCopyOut, {a, IntList{s[1], s[0] * s[2]}}, name + ".merge");
}

Result<ValueId> BlockBuilder::attention(ValueId q, ValueId k_cache, ValueId v_cache, ValueId mask,
                                        const AttentionOptions& o, const std::string& name) {
  if (!o.softcap && !o.sinks) {
    // The fused op: backends with an SDPA kernel keep it, the rest decompose it.
    return op(OpId::ScaledDotProductAttention, {q, k_cache, v_cache, mask, 0.0, false, o.scale, o.heads != o.kv_heads},
              name);
  }
  // Soft-capping sits between the scaling and the mask, and a sink is an extra
  // softmax column: SDPA has no hook for either, so the math is spelled out
  // (same grouping of query heads as sdpa_to_math).
  const auto qs = g_.type(q).sizes;  // copies: adding values reallocates the value table
  const auto ks = g_.type(k_cache).sizes;
  const int64_t group = o.heads / o.kv_heads;
  const SymInt& S = qs[1];
  const SymInt& M = ks[1];
  HF2PTE_ASSIGN_OR_RETURN(ValueId q3, op(OpId::ViewCopyOut, {q, IntList{o.kv_heads, S * group, qs[2]}}, name + ".q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId kt, op(OpId::PermuteCopyOut, {k_cache, IntList{0, 2, 1}}, name + ".kT"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId s, op(OpId::BmmOut, {q3, kt}, name + ".qk"));
  HF2PTE_ASSIGN_OR_RETURN(s, op(OpId::MulScalarOut, {s, o.scale}, name + ".scores"));
  if (o.softcap) {
    HF2PTE_ASSIGN_OR_RETURN(s, softcap(s, *o.softcap, name + ".softcap"));
  }
  HF2PTE_ASSIGN_OR_RETURN(s, op(OpId::ViewCopyOut, {s, IntList{o.kv_heads, group, S, M}}, name + ".scores4"));
  ValueId ninf = scalar(g_.type(s).dtype, -std::numeric_limits<double>::infinity(), name + ".neg_inf");
  HF2PTE_ASSIGN_OR_RETURN(s, op(OpId::WhereSelfOut, {mask, s, ninf}, name + ".masked"));
  SymInt width = M;
  if (o.sinks) {
    // Head h = kv * group + g owns row block (kv, g): its sink logit as column M.
    HF2PTE_ASSIGN_OR_RETURN(ValueId sink, op(OpId::ViewCopyOut, {*o.sinks, IntList{o.kv_heads, group, 1, 1}}, name + ".sink4"));
    HF2PTE_ASSIGN_OR_RETURN(sink, op(OpId::ExpandCopyOut, {sink, IntList{o.kv_heads, group, S, 1}}, name + ".sink_rows"));
    HF2PTE_ASSIGN_OR_RETURN(s, op(OpId::CatOut, {graph::TensorList{s, sink}, int64_t{-1}}, name + ".with_sink"));
    width = M + SymInt(1);
  }
  HF2PTE_ASSIGN_OR_RETURN(s, op(OpId::ViewCopyOut, {s, IntList{o.kv_heads, S * group, width}}, name + ".masked3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId p, op(OpId::SoftmaxOut, {s, int64_t{-1}, false}, name + ".probs"));
  if (o.sinks) {  // the sink's probability is dropped: rows sum to less than 1
    HF2PTE_ASSIGN_OR_RETURN(p, op(OpId::SliceCopyTensorOut, {p, int64_t{-1}, SymInt(0), M}, name + ".probs_no_sink"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId out, op(OpId::BmmOut, {p, v_cache}, name + ".pv"));
  return op(OpId::ViewCopyOut, {out, IntList{o.heads, S, g_.type(v_cache).sizes[2]}}, name);
}

Result<ValueId> BlockBuilder::gated_mlp(ValueId x, const GatedMlpWeights& w, std::string_view act,
                                        const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId gate, linear(x, w.gate, name + ".gate_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId up, linear(x, w.up, name + ".up_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, activation(gate, act, name + ".act"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId prod, op(OpId::MulOut, {a, up}, name + ".gated"));
  return linear(prod, w.down, name + ".down_proj");
}

Result<ValueId> BlockBuilder::clamped_swiglu_mlp(ValueId x, const GatedMlpWeights& w, double limit,
                                                 const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId gate, linear(x, w.gate, name + ".gate_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId up, linear(x, w.up, name + ".up_proj"));
  HF2PTE_ASSIGN_OR_RETURN(gate, op(OpId::ClampOut, {gate, None{}, limit}, name + ".gate_clamped"));
  HF2PTE_ASSIGN_OR_RETURN(up, op(OpId::ClampOut, {up, -limit, limit}, name + ".up_clamped"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId sg, op(OpId::MulScalarOut, {gate, 1.702}, name + ".gate_scaled"));
  HF2PTE_ASSIGN_OR_RETURN(sg, op(OpId::SigmoidOut, {sg}, name + ".gate_sigmoid"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId glu, op(OpId::MulOut, {gate, sg}, name + ".glu"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId up1, op(OpId::AddScalarOut, {up, 1.0}, name + ".up_plus_one"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId prod, op(OpId::MulOut, {up1, glu}, name + ".gated"));
  return linear(prod, w.down, name + ".down_proj");
}

/// Which entries of v are among the k largest along the last dim (bool, v's
/// shape), without a topk kernel: entry e is in the top k iff at least n - k + 1
/// entries are <= v_e, i.e. mean_j [v_j <= v_e] >= (n - k + 0.5) / n (exact: the
/// mean is a multiple of 1/n). Ties select every tied entry.
Result<ValueId> BlockBuilder::top_k_mask(ValueId v, int64_t k, const std::string& name) {
  const auto sizes = g_.type(v).sizes;
  const int64_t n = sizes.back().constant_value();
  IntList as_e(sizes.begin(), sizes.end()), as_j(sizes.begin(), sizes.end());
  as_e.push_back(SymInt(1));
  as_j.back() = SymInt(1);
  as_j.push_back(SymInt(n));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ve, op(OpId::ViewCopyOut, {v, as_e}, name + ".v_e"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId vj, op(OpId::ViewCopyOut, {v, as_j}, name + ".v_j"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId le, op(OpId::LeTensorOut, {vj, ve}, name + ".le"));
  ValueId one = scalar(ScalarType::kFloat, 1.0, name + ".one");
  ValueId zero = scalar(ScalarType::kFloat, 0.0, name + ".zero");
  HF2PTE_ASSIGN_OR_RETURN(ValueId le_f, op(OpId::WhereSelfOut, {le, one, zero}, name + ".le_f"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId frac, op(OpId::MeanOut, {le_f, IntList{-1}, false}, name + ".rank_frac"));
  ValueId thresh = scalar(ScalarType::kFloat, (double(n - k) + 0.5) / double(n), name + ".top_k_thresh");
  return op(OpId::LeTensorOut, {thresh, frac}, name + ".selected");
}

// Routing as HF (Mixtral; Qwen3-MoE with norm_topk_prob; gpt-oss, whose
// router has a bias): softmax over all experts, keep the top k, renormalise.
// That equals a softmax over the k selected router logits, so the weights are
// softmax(where(selected, r, -inf)). Without renormalisation (norm_topk_prob
// false) they are where(selected, softmax(r), 0). "Selected" is top_k_mask.
// DeepSeek-V3 (kSigmoidGrouped) scores s = sigmoid(r) and selects on
// c = s + correction_bias: each group of n = E / n_group experts scores the sum
// of its best two c, the topk_group best groups stay eligible, and the top k c
// among their experts are selected; the weights are the plain s of those,
// divided by their sum (norm_topk_prob), times routed_scaling_factor.
// All experts run on all tokens and are weighted (zero for unselected ones):
// exact and static-shaped, at E/k times the MLP work; per-token dispatch is a
// backend optimisation.
Result<ValueId> BlockBuilder::moe(ValueId x, const MoeWeights& w, const MoeOptions& o, const std::string& name) {
  const int64_t E = int64_t(w.experts.size());
  const SymInt S = g_.type(x).sizes[0];
  LinearWeights router{w.router, w.router_bias};
  // Routing runs in f32 in 16-bit models too: the router's weights are loaded
  // in f32 (moe_weights), x is cast, and the expert weights are cast back to the
  // activations' dtype. HF computes the softmax in f32 and DeepSeek-V3 the whole
  // router; computing the logits in f32 everywhere keeps expert selection, a
  // discrete choice, from flipping on bf16 rounding (docs/decisions.md).
  const ScalarType act = g_.type(x).dtype;
  ValueId xr = x;
  if (act != ScalarType::kFloat) { HF2PTE_ASSIGN_OR_RETURN(xr, op(OpId::ToCopy, {x, ScalarType::kFloat}, name + ".router_in")); }
  HF2PTE_ASSIGN_OR_RETURN(ValueId r, linear(xr, router, name + ".router"));
  // Fill values, made where a branch uses them (no unused constants in the program).
  auto zero = [&] { return scalar(ScalarType::kFloat, 0.0, name + ".zero"); };
  auto neg_inf = [&] { return scalar(ScalarType::kFloat, -std::numeric_limits<double>::infinity(), name + ".neg_inf"); };
  ValueId weights = -1;
  if (o.router == RouterKind::kSigmoidGrouped) {
    const int64_t G = o.n_group, n = E / o.n_group;
    HF2PTE_ASSIGN_OR_RETURN(ValueId sc, op(OpId::SigmoidOut, {r}, name + ".scores"));
    ValueId c = sc;
    if (w.correction_bias) {
      HF2PTE_ASSIGN_OR_RETURN(c, op(OpId::AddOut, {sc, *w.correction_bias}, name + ".corrected"));
    }
    HF2PTE_ASSIGN_OR_RETURN(ValueId cg, op(OpId::ViewCopyOut, {c, IntList{S, G, n}}, name + ".grouped"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId best2, top_k_mask(cg, 2, name + ".group_best2"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId best2_c, op(OpId::WhereSelfOut, {best2, cg, zero()}, name + ".group_best2_scores"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId group_score, op(OpId::SumIntListOut, {best2_c, IntList{-1}, false, None{}}, name + ".group_scores"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId groups, top_k_mask(group_score, o.topk_group, name + ".groups"));
    HF2PTE_ASSIGN_OR_RETURN(groups, op(OpId::ViewCopyOut, {groups, IntList{S, G, 1}}, name + ".groups3"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId eligible, op(OpId::WhereSelfOut, {groups, cg, neg_inf()}, name + ".eligible"));
    HF2PTE_ASSIGN_OR_RETURN(eligible, op(OpId::ViewCopyOut, {eligible, IntList{S, E}}, name + ".eligible2"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId selected, top_k_mask(eligible, o.top_k, name + ".top_k"));
    HF2PTE_ASSIGN_OR_RETURN(weights, op(OpId::WhereSelfOut, {selected, sc, zero()}, name + ".selected_scores"));
    if (o.normalize_top_k) {
      HF2PTE_ASSIGN_OR_RETURN(ValueId sum, op(OpId::SumIntListOut, {weights, IntList{-1}, true, None{}}, name + ".selected_sum"));
      HF2PTE_ASSIGN_OR_RETURN(weights, op(OpId::DivOut, {weights, sum}, name + ".normalized"));
    }
    if (o.routed_scaling_factor != 1.0) {
      HF2PTE_ASSIGN_OR_RETURN(weights, op(OpId::MulScalarOut, {weights, o.routed_scaling_factor}, name + ".weights"));
    }
  } else {
    HF2PTE_ASSIGN_OR_RETURN(ValueId selected, top_k_mask(r, o.top_k, name + ".top_k"));
    if (o.normalize_top_k) {
      HF2PTE_ASSIGN_OR_RETURN(ValueId masked, op(OpId::WhereSelfOut, {selected, r, neg_inf()}, name + ".masked"));
      HF2PTE_ASSIGN_OR_RETURN(weights, op(OpId::SoftmaxOut, {masked, int64_t{-1}, false}, name + ".weights"));
    } else {
      HF2PTE_ASSIGN_OR_RETURN(ValueId probs, op(OpId::SoftmaxOut, {r, int64_t{-1}, false}, name + ".probs"));
      HF2PTE_ASSIGN_OR_RETURN(weights, op(OpId::WhereSelfOut, {selected, probs, zero()}, name + ".weights"));
    }
  }

  if (act != ScalarType::kFloat) { HF2PTE_ASSIGN_OR_RETURN(weights, op(OpId::ToCopy, {weights, act}, name + ".weights_cast")); }
  auto expert = [&](const GatedMlpWeights& e, const std::string& p) {
    return o.swiglu_limit ? clamped_swiglu_mlp(x, e, *o.swiglu_limit, p) : gated_mlp(x, e, o.activation, p);
  };
  std::optional<ValueId> acc;
  for (int64_t e = 0; e < E; ++e) {
    const auto p = fmt::format("{}.experts.{}", name, e);
    HF2PTE_ASSIGN_OR_RETURN(ValueId y, expert(w.experts[size_t(e)], p));
    HF2PTE_ASSIGN_OR_RETURN(ValueId we, op(OpId::SliceCopyTensorOut, {weights, int64_t{-1}, SymInt(e), SymInt(e + 1)}, p + ".weight"));
    HF2PTE_ASSIGN_OR_RETURN(y, op(OpId::MulOut, {y, we}, p + ".weighted"));
    if (acc) {
      HF2PTE_ASSIGN_OR_RETURN(y, op(OpId::AddOut, {*acc, y}, p + ".sum"));
    }
    acc = y;
  }
  if (w.shared) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId y, gated_mlp(x, *w.shared, o.activation, name + ".shared_expert"));
    if (w.shared_gate) {  // Qwen2-MoE scales it by sigmoid(x . w)
      HF2PTE_ASSIGN_OR_RETURN(ValueId g, linear(x, LinearWeights{*w.shared_gate, std::nullopt}, name + ".shared_gate"));
      HF2PTE_ASSIGN_OR_RETURN(g, op(OpId::SigmoidOut, {g}, name + ".shared_gate_sigmoid"));
      HF2PTE_ASSIGN_OR_RETURN(y, op(OpId::MulOut, {y, g}, name + ".shared_weighted"));
    }
    HF2PTE_ASSIGN_OR_RETURN(y, op(OpId::AddOut, {*acc, y}, name + ".with_shared"));
    acc = y;
  }
  return *acc;
}

std::string layer_name(std::string_view tmpl, int64_t layer) { return fmt::format(fmt::runtime(tmpl), layer); }

}  // namespace hf2pte::models
