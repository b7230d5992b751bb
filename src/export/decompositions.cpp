#include "export/decompositions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "export/stages.h"
#include "graph/shapes.h"

namespace hf2pte::exp {

namespace {

using graph::Arg;
using graph::IntList;
using graph::None;
using graph::SymInt;
using graph::TensorType;
using Replacement = Result<std::optional<std::vector<ValueId>>>;

Replacement no_match() { return std::optional<std::vector<ValueId>>{}; }
Replacement replaced_by(ValueId v) { return std::optional<std::vector<ValueId>>{std::vector<ValueId>{v}}; }

SymInt product(const std::vector<SymInt>& sizes, size_t begin, size_t end) {
  SymInt p = 1;
  for (size_t i = begin; i < end; ++i) p = p * sizes[i];
  return p;
}

/// view_copy unless the shape is already `sizes`.
Result<ValueId> view(Graph& g, ValueId x, IntList sizes, const std::string& name) {
  if (g.type(x).sizes == sizes) return x;
  return g.add(OpId::ViewCopyOut, {x, std::move(sizes)}, name);
}

bool is_contiguous(const TensorType& t) {
  for (size_t i = 0; i < t.dim_order.size(); ++i) {
    if (t.dim_order[i] != i) return false;
  }
  return true;
}

/// A contiguous copy of `x` (dim_order None) when its layout is strided, else x.
Result<ValueId> contiguous(Graph& g, ValueId x, const std::string& name) {
  if (is_contiguous(g.type(x))) return x;
  return g.add(OpId::ToDimOrderCopyOut, {x, false, None{}}, name);
}

/// view_copy that first makes a strided input contiguous (item 18).
Result<ValueId> contiguous_view(Graph& g, ValueId x, IntList sizes, const std::string& name) {
  if (g.type(x).sizes == sizes) return x;
  HF2PTE_ASSIGN_OR_RETURN(ValueId c, contiguous(g, x, name + ".contiguous"));
  return g.add(OpId::ViewCopyOut, {c, std::move(sizes)}, name);
}

/// A small constant tensor from typed host values.
template <typename T>
ValueId table_constant(Graph& g, ScalarType dtype, std::vector<int64_t> sizes, const std::vector<T>& values,
                       const std::string& name, const std::string& origin) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return g.add_constant(name, graph::ConstantData::from_bytes(dtype, std::move(sizes), std::move(bytes), origin));
}

ValueId bool_table(Graph& g, std::vector<int64_t> sizes, const std::vector<uint8_t>& v, const std::string& name,
                   const std::string& origin) {
  return table_constant<uint8_t>(g, ScalarType::kBool, std::move(sizes), v, name, origin);
}

/// A 0-d constant of `dtype` holding `value` (any float type, i64, i32 or bool).
ValueId typed_scalar(Graph& g, ScalarType dtype, double value, const std::string& name) {
  return g.add_constant(name, graph::ConstantData::scalar(dtype, value));
}

/// A constant of float type `dtype` (f32 / f16 / bf16) holding `values`.
ValueId float_table(Graph& g, ScalarType dtype, std::vector<int64_t> sizes, const std::vector<double>& values,
                    const std::string& name, const std::string& origin) {
  return g.add_constant(name, graph::ConstantData::from_values(dtype, std::move(sizes), values, origin));
}

/// An integer argument that must be a compile-time constant.
Result<int64_t> const_int(const Arg& a, const char* what) {
  if (const auto* i = std::get_if<int64_t>(&a)) return *i;
  if (const auto* s = std::get_if<SymInt>(&a); s && s->is_constant()) return s->constant_value();
  return make_error(ErrorCode::kNotSupported, "{} must be a constant integer", what);
}

Result<int> node_dim(const Graph& g, ValueId x, const Arg& a) {
  HF2PTE_ASSIGN_OR_RETURN(int64_t d, const_int(a, "dim"));
  return graph::normalize_dim(d, g.type(x).rank());
}


// linear(x, W, b) -> view(addmm(b, view(x, [M, K]), W^T) | mm(...), [..., N])
// W^T is produced at export when W is a streamed constant; otherwise permute_copy.
Replacement linear_to_mm(Graph& g, const Node& n) {
  if (n.op != OpId::Linear) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  ValueId w = std::get<ValueId>(n.args[1]);
  const TensorType xt = g.type(x);  // copies: adding values below reallocates the value table
  const auto ws = g.type(w).sizes;
  ValueId wt;
  const auto wv = g.value(w);
  if (wv.role == graph::ValueRole::kConstant && g.constant(w).transposed) {
    wt = g.add_constant(wv.name + ".T", g.constant(w).transposed());
  } else {
    HF2PTE_ASSIGN_OR_RETURN(wt, g.add(OpId::PermuteCopyOut, {w, IntList{1, 0}}, n.name + ".wT"));
  }
  SymInt m = product(xt.sizes, 0, xt.sizes.size() - 1);
  HF2PTE_ASSIGN_OR_RETURN(ValueId x2, view(g, x, {m, xt.sizes.back()}, n.name + ".in2d"));
  ValueId y;
  if (const auto* b = std::get_if<ValueId>(&n.args[2])) {
    HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::AddmmOut, {*b, x2, wt}, n.name + (xt.rank() == 2 ? "" : ".2d")));
  } else {
    HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::MmOut, {x2, wt}, n.name + (xt.rank() == 2 ? "" : ".2d")));
  }
  IntList out_sizes(xt.sizes.begin(), xt.sizes.end() - 1);
  out_sizes.push_back(ws[0]);
  HF2PTE_ASSIGN_OR_RETURN(ValueId out, view(g, y, out_sizes, n.name));
  return replaced_by(out);
}

// rms_norm(x, w, eps) -> x * rsqrt(mean(x^2, -1, keepdim) + eps) * w
// A 16-bit x is normalised in f32, as HF's RMSNorms do (hidden_states.to(float32)):
// an f16/bf16 weight then multiplies the result cast back to x's dtype (Llama:
// weight * hidden.to(input_dtype)); an f32 weight multiplies in f32 before the
// cast (Gemma: (normed * (1 + w.float())).type_as(x)).
Replacement rms_norm_to_primitives(Graph& g, const Node& n) {
  if (n.op != OpId::RmsNorm) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  const auto& norm_shape = std::get<IntList>(n.args[1]);
  if (norm_shape.size() != 1) {
    return make_error(ErrorCode::kNotSupported, "rms_norm over {} dims is not supported; expected 1", norm_shape.size());
  }
  double eps = std::holds_alternative<double>(n.args[3]) ? std::get<double>(n.args[3])
                                                         : double(std::numeric_limits<float>::epsilon());
  const ScalarType dt = g.type(x).dtype;
  const bool upcast = dt != ScalarType::kFloat;
  const ValueId* w = std::get_if<ValueId>(&n.args[2]);
  const bool f32_weight = w != nullptr && g.type(*w).dtype == ScalarType::kFloat;
  if (upcast) { HF2PTE_ASSIGN_OR_RETURN(x, g.add(OpId::ToCopy, {x, ScalarType::kFloat}, n.name + ".f32")); }
  HF2PTE_ASSIGN_OR_RETURN(ValueId sq, g.add(OpId::PowTensorScalarOut, {x, 2.0}, n.name + ".sq"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ms, g.add(OpId::MeanOut, {sq, IntList{-1}, true}, n.name + ".mean"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ve, g.add(OpId::AddScalarOut, {ms, eps}, n.name + ".var_eps"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId r, g.add(OpId::RsqrtOut, {ve}, n.name + ".rstd"));
  const bool last_is_cast = upcast && (w == nullptr || f32_weight);
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::MulOut, {x, r}, n.name + (w == nullptr && !upcast ? "" : ".normed")));
  if (w != nullptr && f32_weight) { HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::MulOut, {*w, y}, n.name + (upcast ? ".scaled" : ""))); }
  if (upcast) { HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::ToCopy, {y, dt}, n.name + (last_is_cast ? "" : ".cast"))); }
  if (w != nullptr && !f32_weight) { HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::MulOut, {*w, y}, n.name)); }
  return replaced_by(y);
}

// _to_copy(x, dtype) -> _to_dim_order_copy.out into an out of `dtype` (upstream's
// MemoryFormatOpsPass); a cast to x's own dtype is x itself.
Replacement to_copy_to_dim_order_copy(Graph& g, const Node& n) {
  if (n.op != OpId::ToCopy) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  const ScalarType* dt = std::get_if<ScalarType>(&n.args[1]);
  if (dt == nullptr || *dt == g.type(x).dtype) return replaced_by(x);
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::ToDimOrderCopyOut, {x, false, None{}}, n.name));
  g.mutable_value(y).type.dtype = *dt;
  return replaced_by(y);
}

// silu(x) -> x * sigmoid(x)
Replacement silu_to_sigmoid_mul(Graph& g, const Node& n) {
  if (n.op != OpId::Silu) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  HF2PTE_ASSIGN_OR_RETURN(ValueId s, g.add(OpId::SigmoidOut, {x}, n.name + ".sigmoid"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::MulOut, {x, s}, n.name));
  return replaced_by(y);
}

// sdpa(q, k, v, mask, scale, is_causal) -> softmax((q * scale) k^T [masked]) v, with
// GQA by grouping query heads: q [.., Hq, L, D] viewed as [B*Hkv, g*L, D] shares
// k/v [B*Hkv, S, D]; v may have Dv != D. is_causal adds the top-left tril mask
// (keep j <= i) as a bool mask; bool masks fill -inf, float masks are added.
// Softmax runs in the input dtype (half_to_float=False); the output is a fresh
// contiguous view_copy of the bmm result.
Replacement sdpa_to_math(Graph& g, const Node& n) {
  if (n.op != OpId::ScaledDotProductAttention) return no_match();
  ValueId q = std::get<ValueId>(n.args[0]), k = std::get<ValueId>(n.args[1]), v = std::get<ValueId>(n.args[2]);
  const auto qs = g.type(q).sizes;  // copies: adding values reallocates the value table
  const auto ks = g.type(k).sizes;
  const auto vs = g.type(v).sizes;
  size_t r = qs.size();
  if (r < 3) return make_error(ErrorCode::kNotSupported, "sdpa on rank-{} query; expected rank >= 3", r);
  const bool causal = std::get<bool>(n.args[5]);
  if (causal && std::holds_alternative<ValueId>(n.args[3])) {
    return make_error(ErrorCode::kInvalidInput, "sdpa: attn_mask and is_causal=True cannot both be set");
  }
  if (std::holds_alternative<double>(n.args[4]) && std::get<double>(n.args[4]) != 0.0) {
    return make_error(ErrorCode::kNotSupported, "sdpa with dropout_p > 0 cannot be exported for inference");
  }
  const SymInt& hq = qs[r - 3];
  const SymInt& hkv = ks[r - 3];
  if (!hq.is_constant() || !hkv.is_constant() || hq.constant_value() % hkv.constant_value() != 0) {
    return make_error(ErrorCode::kInvalidInput, "sdpa: {} query heads cannot share {} key/value heads", hq.str(), hkv.str());
  }
  int64_t group = hq.constant_value() / hkv.constant_value();
  if (group != 1 && !std::get<bool>(n.args[7])) {
    return make_error(ErrorCode::kInvalidInput, "sdpa: {} query heads and {} kv heads need enable_gqa=True", hq.str(), hkv.str());
  }
  SymInt lead = product(qs, 0, r - 3);
  SymInt batch = lead * hkv;
  const SymInt& L = qs[r - 2];
  const SymInt& S = ks[r - 2];
  double scale = std::holds_alternative<double>(n.args[6]) ? std::get<double>(n.args[6])
                                                          : 1.0 / std::sqrt(double(qs.back().constant_value()));
  std::optional<ValueId> mask;
  if (const auto* m = std::get_if<ValueId>(&n.args[3])) mask = *m;
  if (causal) {
    if (!L.is_constant() || !S.is_constant()) {
      return make_error(ErrorCode::kNotSupported, "sdpa: is_causal=True with symbolic sizes L={}, S={}; pass an explicit mask",
                        L.str(), S.str());
    }
    int64_t l = L.constant_value(), s = S.constant_value();
    std::vector<uint8_t> keep(static_cast<size_t>(l * s));
    for (int64_t i = 0; i < l; ++i) for (int64_t j = 0; j < s; ++j) keep[size_t(i * s + j)] = j <= i;
    mask = g.add_constant(n.name + ".causal", graph::ConstantData::from_bytes(ScalarType::kBool, {l, s}, std::move(keep),
                                                                              fmt::format("causal tril [{}, {}]", l, s)));
  }

  HF2PTE_ASSIGN_OR_RETURN(ValueId q3, contiguous_view(g, q, {batch, L * group, qs.back()}, n.name + ".q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId k3, contiguous_view(g, k, {batch, S, ks.back()}, n.name + ".k"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v3, contiguous_view(g, v, {batch, S, vs.back()}, n.name + ".v"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId kt, g.add(OpId::PermuteCopyOut, {k3, IntList{0, 2, 1}}, n.name + ".kT"));
  // The scale goes on the smaller operand: q [.., L, D] unless the keys are
  // statically fewer than the head dim (then the scores [.., L, S]). Whisper
  // (and HF's eager attention for most models) scales q too; the scores of a
  // 1500-frame encoder are 18M floats per layer against q's 0.8M.
  const bool scale_scores = qs.back().is_constant() && S.is_constant() && S.constant_value() < qs.back().constant_value();
  if (!scale_scores) {
    HF2PTE_ASSIGN_OR_RETURN(q3, g.add(OpId::MulScalarOut, {q3, scale}, n.name + ".q_scaled"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId scores, g.add(OpId::BmmOut, {q3, kt}, n.name + ".qk"));
  if (scale_scores) {
    HF2PTE_ASSIGN_OR_RETURN(scores, g.add(OpId::MulScalarOut, {scores, scale}, n.name + ".scores"));
  }
  if (mask) {
    // Scores as [lead, Hkv, group, L, S]; the mask (right-aligned to [lead.., Hq, L, S])
    // as [lead|1, Hkv|1, group|1, L|1, S|1]: a full head dim splits into (Hkv, group).
    const TensorType mt = g.type(*mask);
    std::vector<SymInt> ms = mt.sizes;
    if (ms.size() > r) return make_error(ErrorCode::kInvalidInput, "sdpa: mask {} has more dims than the query", mt.str());
    while (ms.size() < r) ms.insert(ms.begin(), SymInt(1));
    SymInt mlead = product(ms, 0, r - 3);
    const SymInt& mh = ms[r - 3];
    IntList m5;
    if (mh == SymInt(1)) {
      m5 = {mlead, 1, 1, ms[r - 2], ms[r - 1]};
    } else if (mh == hq) {
      m5 = {mlead, hkv, group, ms[r - 2], ms[r - 1]};
    } else {
      return make_error(ErrorCode::kInvalidInput, "sdpa: mask {} does not broadcast over {} heads", mt.str(), hq.str());
    }
    if (!(mlead == SymInt(1)) && !(mlead == lead)) {
      return make_error(ErrorCode::kNotSupported, "sdpa: mask {} broadcasts partially over the batch dims", mt.str());
    }
    HF2PTE_ASSIGN_OR_RETURN(ValueId m, contiguous_view(g, *mask, m5, n.name + ".mask5"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId s5, view(g, scores, {lead, hkv, group, L, S}, n.name + ".scores5"));
    if (mt.dtype == ScalarType::kBool) {
      ValueId ninf = typed_scalar(g, g.type(scores).dtype, -std::numeric_limits<double>::infinity(), n.name + ".neg_inf");
      HF2PTE_ASSIGN_OR_RETURN(s5, g.add(OpId::WhereSelfOut, {m, s5, ninf}, n.name + ".masked"));
    } else {
      HF2PTE_ASSIGN_OR_RETURN(s5, g.add(OpId::AddOut, {s5, m}, n.name + ".masked"));
    }
    HF2PTE_ASSIGN_OR_RETURN(scores, view(g, s5, {batch, L * group, S}, n.name + ".masked3"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId p, g.add(OpId::SoftmaxOut, {scores, int64_t{-1}, false}, n.name + ".probs"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId o, g.add(OpId::BmmOut, {p, v3}, n.name + ".pv"));
  IntList out_sizes(qs.begin(), qs.end() - 1);
  out_sizes.push_back(vs.back());
  HF2PTE_ASSIGN_OR_RETURN(ValueId out, view(g, o, out_sizes, n.name));
  return replaced_by(out);
}

// ---- items 5-6: split / chunk ----

/// outputs[i] = slice_copy(x, d, start_i, start_i + len_i), lengths read off the node's outputs.
Replacement narrow_pieces(Graph& g, const Node& n) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".contiguous"));
  HF2PTE_ASSIGN_OR_RETURN(int d, node_dim(g, x, n.args[2]));
  std::vector<ValueId> outs;
  SymInt start = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    SymInt len = g.type(n.outputs[i]).sizes[size_t(d)];
    HF2PTE_ASSIGN_OR_RETURN(ValueId piece, g.add(OpId::SliceCopyTensorOut, {x, int64_t{d}, start, start + len, int64_t{1}},
                                                 fmt::format("{}.{}", n.name, i)));
    outs.push_back(piece);
    start = start + len;
  }
  return std::optional<std::vector<ValueId>>{std::move(outs)};
}

// split(x, size | sizes, d) -> [narrow(x, d, start_i, len_i)]: pieces of `size`
// (the last one shorter) or of the listed sizes; start_i = sum of earlier lengths.
Replacement split_to_narrow(Graph& g, const Node& n) {
  if (n.op != OpId::SplitTensor && n.op != OpId::SplitWithSizes) return no_match();
  return narrow_pieces(g, n);
}

// chunk(x, c, d) -> split(x, ceil(size_d / c), d) -> narrows (so fewer than c
// pieces when size_d is small, as torch.chunk gives).
Replacement chunk_to_narrow(Graph& g, const Node& n) {
  if (n.op != OpId::Chunk) return no_match();
  return narrow_pieces(g, n);
}

// ---- item 7: topk ----

// topk(x, k, d, largest) -> (gather(x, d, idx), idx) with idx = argsort(x)[:k].
// argsort without a sort kernel: rank_i = #{j: x_j > x_i} + #{j < i: x_j == x_i}
// (a stable descending rank; < and <= for largest=False), i.e.
// rank = sum_j where(j < i, x_j >= x_i, x_j > x_i); then argsort[r] = sum_i i * (rank_i == r).
// Works on the last dim (other dims are permuted there and back).
Replacement topk_to_argsort_gather(Graph& g, const Node& n) {
  if (n.op != OpId::Topk) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".contiguous"));
  const TensorType xt = g.type(x);
  HF2PTE_ASSIGN_OR_RETURN(int d, node_dim(g, x, n.args[2]));
  const bool largest = std::get<bool>(n.args[3]);
  const SymInt k = g.type(n.outputs[0]).sizes[size_t(d)];
  const SymInt& size_n = xt.sizes[size_t(d)];
  if (!size_n.is_constant()) return make_error(ErrorCode::kNotSupported, "topk along symbolic dim {}", size_n.str());
  const int64_t N = size_n.constant_value();
  const int last = xt.rank() - 1;
  IntList perm;
  for (int i = 0; i < xt.rank(); ++i) perm.emplace_back(i == d ? last : i == last ? d : i);
  ValueId xl = x;
  if (d != last) { HF2PTE_ASSIGN_OR_RETURN(xl, g.add(OpId::PermuteCopyOut, {x, perm}, n.name + ".to_last")); }
  IntList rows = g.type(xl).sizes;
  IntList col = rows, row = rows;
  col.back() = 1;
  col.push_back(N);  // [.., 1, N]: x_j
  row.push_back(1);  // [.., N, 1]: x_i
  HF2PTE_ASSIGN_OR_RETURN(ValueId xj, g.add(OpId::ViewCopyOut, {xl, col}, n.name + ".xj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId xi, g.add(OpId::ViewCopyOut, {xl, row}, n.name + ".xi"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId strict, g.add(largest ? OpId::GtTensorOut : OpId::LtTensorOut, {xj, xi}, n.name + ".before"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ties, g.add(largest ? OpId::GeTensorOut : OpId::LeTensorOut, {xj, xi}, n.name + ".before_or_tie"));
  std::vector<uint8_t> lower(static_cast<size_t>(N * N));
  for (int64_t i = 0; i < N; ++i) for (int64_t j = 0; j < N; ++j) lower[size_t(i * N + j)] = j < i;
  ValueId earlier = bool_table(g, {N, N}, lower, n.name + ".earlier", fmt::format("j < i [{}, {}]", N, N));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ahead, g.add(OpId::WhereSelfOut, {earlier, ties, strict}, n.name + ".ahead"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rank, g.add(OpId::SumIntListOut, {ahead, IntList{-1}, false, ScalarType::kLong}, n.name + ".rank"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rank_row, g.add(OpId::ViewCopyOut, {rank, col}, n.name + ".rank_row"));
  std::vector<int64_t> iota(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) iota[size_t(i)] = i;
  ValueId pos = table_constant<int64_t>(g, ScalarType::kLong, {N, 1}, iota, n.name + ".pos", fmt::format("arange({}) [{}, 1]", N, N));
  ValueId idx_i = table_constant<int64_t>(g, ScalarType::kLong, {N}, iota, n.name + ".iota", fmt::format("arange({})", N));
  ValueId zero = typed_scalar(g, ScalarType::kLong, 0, n.name + ".zero");
  HF2PTE_ASSIGN_OR_RETURN(ValueId at, g.add(OpId::EqTensorOut, {rank_row, pos}, n.name + ".at"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId who, g.add(OpId::WhereSelfOut, {at, idx_i, zero}, n.name + ".who"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId order, g.add(OpId::SumIntListOut, {who, IntList{-1}, false, ScalarType::kLong}, n.name + ".argsort"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId idx, g.add(OpId::SliceCopyTensorOut, {order, int64_t{-1}, SymInt(0), k, int64_t{1}}, n.name + ".idx"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId vals, g.add(OpId::GatherOut, {xl, int64_t{-1}, idx}, n.name + ".vals"));
  if (d != last) {
    HF2PTE_ASSIGN_OR_RETURN(vals, g.add(OpId::PermuteCopyOut, {vals, perm}, n.name + ".values"));
    HF2PTE_ASSIGN_OR_RETURN(idx, g.add(OpId::PermuteCopyOut, {idx, perm}, n.name + ".indices"));
  }
  return std::optional<std::vector<ValueId>>{std::vector<ValueId>{vals, idx}};
}

// ---- item 8: detach ----

// detach(x) -> x (no autograd at export).
Replacement detach_to_identity(Graph&, const Node& n) {
  if (n.op != OpId::Detach) return no_match();
  return replaced_by(std::get<ValueId>(n.args[0]));
}

// ---- item 9: avg_pool2d ----

// avg_pool2d(x, k, s, p, ceil_mode, count_include_pad, divisor_override)
//   -> convolution(x, W, None, s, p, [1, 1], groups=C) with W[c, 0] = 1 / divisor:
// a depthwise conv with a ones/divisor kernel; the kernel is clamped to the padded
// input (k = min(k, H + 2p)). divisor = divisor_override, else torch's per-window
// size: the window [i*s - p, i*s - p + k) clipped to [-p, H + p) (count_include_pad)
// or to [0, H); when that is not one number, W = ones and the sum is divided by the
// constant [OH, OW] map of them. ceil_mode's last window may pass the padded input:
// x is first extended on the right/bottom by zeros (cat) so the conv sees it whole.
Replacement avg_pool2d_to_depthwise_conv(Graph& g, const Node& n) {
  if (n.op != OpId::AvgPool2d) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".contiguous"));
  const TensorType xt = g.type(x);
  const int r = xt.rank();
  for (int i = r - 3; i < r; ++i) {
    if (!xt.sizes[size_t(i)].is_constant()) {
      return make_error(ErrorCode::kNotSupported, "avg_pool2d on symbolic channel/spatial size {}", xt.str());
    }
  }
  const int64_t C = xt.sizes[size_t(r - 3)].constant_value();
  const int64_t in[2] = {xt.sizes[size_t(r - 2)].constant_value(), xt.sizes[size_t(r - 1)].constant_value()};
  const auto ys = g.type(n.outputs[0]).sizes;
  const int64_t out[2] = {ys[size_t(r - 2)].constant_value(), ys[size_t(r - 1)].constant_value()};
  const auto& kl = std::get<IntList>(n.args[1]);
  const auto& sl = std::get<IntList>(n.args[2]);
  const auto& pl = std::get<IntList>(n.args[3]);
  auto pick = [](const IntList& l, size_t i, int64_t dflt) -> Result<int64_t> {
    if (l.empty()) return dflt;
    const SymInt& v = l[l.size() == 1 ? 0 : i];
    if (!v.is_constant()) return make_error(ErrorCode::kNotSupported, "avg_pool2d: symbolic window arguments");
    return v.constant_value();
  };
  int64_t kk[2], ss[2], pp[2], extra[2];
  for (size_t i = 0; i < 2; ++i) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t k, pick(kl, i, 1));
    HF2PTE_ASSIGN_OR_RETURN(pp[i], pick(pl, i, 0));
    HF2PTE_ASSIGN_OR_RETURN(ss[i], pick(sl, i, k));
    kk[i] = std::min(k, in[i] + 2 * pp[i]);
    extra[i] = std::max<int64_t>(0, (out[i] - 1) * ss[i] + kk[i] - (in[i] + 2 * pp[i]));  // ceil_mode only
  }
  const bool include_pad = std::get<bool>(n.args[5]);
  std::optional<int64_t> divisor;
  if (!std::holds_alternative<None>(n.args[6])) { HF2PTE_ASSIGN_OR_RETURN(divisor, const_int(n.args[6], "divisor_override")); }
  if (divisor && *divisor == 0) return make_error(ErrorCode::kInvalidInput, "avg_pool2d: divisor_override must be non-zero");
  std::vector<double> count(static_cast<size_t>(out[0] * out[1]));
  for (int64_t i = 0; i < out[0]; ++i) {
    for (int64_t j = 0; j < out[1]; ++j) {
      int64_t h0 = i * ss[0] - pp[0], w0 = j * ss[1] - pp[1];
      int64_t h1 = std::min(h0 + kk[0], in[0] + pp[0]), w1 = std::min(w0 + kk[1], in[1] + pp[1]);
      if (!include_pad) h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, in[0]), w1 = std::min(w1, in[1]);
      count[size_t(i * out[1] + j)] = double((h1 - h0) * (w1 - w0));
    }
  }
  if (!divisor && std::all_of(count.begin(), count.end(), [&](double c) { return c == count[0]; })) divisor = int64_t(count[0]);
  std::vector<double> w(static_cast<size_t>(C * kk[0] * kk[1]), divisor ? 1.0 / double(*divisor) : 1.0);
  ValueId wc = float_table(g, xt.dtype, {C, 1, kk[0], kk[1]}, w, n.name + ".weight",
                                     divisor ? fmt::format("ones/{} [{}, 1, {}, {}]", *divisor, C, kk[0], kk[1])
                                             : fmt::format("ones [{}, 1, {}, {}]", C, kk[0], kk[1]));
  ValueId x4 = x;
  if (r == 3) { HF2PTE_ASSIGN_OR_RETURN(x4, g.add(OpId::ViewCopyOut, {x, IntList{1, C, in[0], in[1]}}, n.name + ".in4d")); }
  for (size_t i = 0; i < 2; ++i) {
    if (extra[i] == 0) continue;
    IntList zs = g.type(x4).sizes;
    zs[2 + i] = extra[i];
    std::vector<int64_t> zsizes;
    for (const auto& z : zs) zsizes.push_back(z.constant_value());
    int64_t zn = 1;
    for (auto z : zsizes) zn *= z;
    ValueId zeros = float_table(g, xt.dtype, zsizes, std::vector<double>(static_cast<size_t>(zn), 0.0),
                                          fmt::format("{}.zeros{}", n.name, i), "zeros (ceil_mode)");
    HF2PTE_ASSIGN_OR_RETURN(x4, g.add(OpId::CatOut, {graph::TensorList{x4, zeros}, int64_t(2 + i)}, fmt::format("{}.extend{}", n.name, i)));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::ConvolutionOut,
                                           {x4, wc, None{}, IntList{ss[0], ss[1]}, IntList{pp[0], pp[1]}, IntList{1, 1}, false,
                                            IntList{0, 0}, SymInt(C)},
                                           n.name + (divisor && r == 4 ? "" : ".sum")));
  if (!divisor) {
    ValueId cc = float_table(g, xt.dtype, {out[0], out[1]}, count, n.name + ".count",
                                       fmt::format("window sizes [{}, {}]", out[0], out[1]));
    HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::DivOut, {y, cc}, n.name + (r == 4 ? "" : ".avg")));
  }
  if (r == 3) { HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::ViewCopyOut, {y, g.type(n.outputs[0]).sizes}, n.name)); }
  return replaced_by(y);
}

// ---- items 10-11: bucketize / searchsorted ----

/// sum(cmp(boundaries, values[..., None]), -1) with cmp = (right ? <= : <).
Result<ValueId> count_before(Graph& g, ValueId seq, ValueId values_col, bool right, bool out_int32, const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId below, g.add(right ? OpId::LeTensorOut : OpId::LtTensorOut, {seq, values_col}, name + ".below"));
  return g.add(OpId::SumIntListOut, {below, IntList{-1}, false, out_int32 ? ScalarType::kInt : ScalarType::kLong}, name);
}

// bucketize(x, b, out_int32, right) -> sum(b < x[..., None], -1) (b <= x when right):
// the number of boundaries before x, i.e. the i with b[i-1] < x <= b[i] (<= / < when right).
Replacement bucketize_to_compare_sum(Graph& g, const Node& n) {
  if (n.op != OpId::BucketizeTensor) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".x_contiguous"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId b, contiguous(g, std::get<ValueId>(n.args[1]), n.name + ".b_contiguous"));
  if (g.type(b).rank() != 1) return make_error(ErrorCode::kInvalidInput, "bucketize: boundaries must be 1-D; got {}", g.type(b).str());
  IntList col = g.type(x).sizes;
  col.emplace_back(1);
  HF2PTE_ASSIGN_OR_RETURN(ValueId xc, g.add(OpId::ViewCopyOut, {x, col}, n.name + ".col"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, count_before(g, b, xc, std::get<bool>(n.args[3]), std::get<bool>(n.args[2]), n.name));
  return replaced_by(y);
}

// searchsorted(s, v, out_int32, right) -> sum(s[..., None, :] < v[..., :, None], -1)
// (<= when right; side="right" is right=True): a 1-D s is shared by every value,
// an N-D s has one sorted row per leading index of v.
Replacement searchsorted_to_compare_sum(Graph& g, const Node& n) {
  if (n.op != OpId::SearchsortedTensor) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId s, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".s_contiguous"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v, contiguous(g, std::get<ValueId>(n.args[1]), n.name + ".v_contiguous"));
  const TensorType st = g.type(s), vt = g.type(v);
  ValueId seq = s;
  if (st.rank() > 1) {
    if (vt.rank() != st.rank()) return make_error(ErrorCode::kInvalidInput, "searchsorted: sorted_sequence {} and values {} need the same rank", st.str(), vt.str());
    IntList row = st.sizes;
    row.insert(row.end() - 1, SymInt(1));
    HF2PTE_ASSIGN_OR_RETURN(seq, g.add(OpId::ViewCopyOut, {s, row}, n.name + ".rows"));
  }
  IntList col = vt.sizes;
  col.emplace_back(1);
  HF2PTE_ASSIGN_OR_RETURN(ValueId vc, g.add(OpId::ViewCopyOut, {v, col}, n.name + ".col"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, count_before(g, seq, vc, std::get<bool>(n.args[3]), std::get<bool>(n.args[2]), n.name));
  return replaced_by(y);
}

// ---- item 12: adaptive_avg_pool2d ----

/// Constant (H, W, OH, OW) of an adaptive pool, or nullopt when any is symbolic.
std::optional<std::array<int64_t, 4>> adaptive_sizes(const Graph& g, const Node& n) {
  const auto& xs = g.type(std::get<ValueId>(n.args[0])).sizes;
  const auto& os = std::get<IntList>(n.args[1]);
  std::array<const SymInt*, 4> s{&xs[xs.size() - 2], &xs[xs.size() - 1], &os[0], &os[1]};
  std::array<int64_t, 4> v{};
  for (size_t i = 0; i < 4; ++i) {
    if (!s[i]->is_constant()) return std::nullopt;
    v[i] = s[i]->constant_value();
  }
  return v;
}

// adaptive_avg_pool2d(x, [OH, OW]) with H % OH == 0 and W % OW == 0
//   -> avg_pool2d(x, kernel = stride = [H/OH, W/OW], padding 0). Symbolic H/W: left alone.
Replacement adaptive_avg_pool2d_to_avg_pool2d(Graph& g, const Node& n) {
  if (n.op != OpId::AdaptiveAvgPool2d) return no_match();
  auto v = adaptive_sizes(g, n);
  if (!v) return no_match();
  auto [H, W, OH, OW] = *v;
  if (OH <= 0 || OW <= 0 || H % OH != 0 || W % OW != 0) return no_match();
  IntList k{H / OH, W / OW};
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::AvgPool2d, {n.args[0], k, k, IntList{0, 0}, false, true, None{}}, n.name));
  return replaced_by(y);
}

// adaptive_avg_pool2d(x, [OH, OW]) otherwise -> cat_i(cat_j(mean(x[.., h0:h1, w0:w1], [-2, -1])))
// with windows [floor(i*H/OH), ceil((i+1)*H/OH)) (and the same for W). Symbolic H/W: left alone.
Replacement adaptive_avg_pool2d_to_windows(Graph& g, const Node& n) {
  if (n.op != OpId::AdaptiveAvgPool2d) return no_match();
  auto v = adaptive_sizes(g, n);
  if (!v) return no_match();
  auto [H, W, OH, OW] = *v;
  if (OH <= 0 || OW <= 0) return make_error(ErrorCode::kInvalidInput, "adaptive_avg_pool2d: output size must be positive");
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".contiguous"));
  std::vector<ValueId> row_vals;
  for (int64_t i = 0; i < OH; ++i) {
    const int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH;
    HF2PTE_ASSIGN_OR_RETURN(ValueId band, g.add(OpId::SliceCopyTensorOut, {x, int64_t{-2}, SymInt(h0), SymInt(h1), int64_t{1}},
                                                fmt::format("{}.r{}", n.name, i)));
    graph::TensorList cells;
    for (int64_t j = 0; j < OW; ++j) {
      const int64_t w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
      HF2PTE_ASSIGN_OR_RETURN(ValueId win, g.add(OpId::SliceCopyTensorOut, {band, int64_t{-1}, SymInt(w0), SymInt(w1), int64_t{1}},
                                                 fmt::format("{}.r{}c{}", n.name, i, j)));
      HF2PTE_ASSIGN_OR_RETURN(ValueId m, g.add(OpId::MeanOut, {win, IntList{-2, -1}, true}, fmt::format("{}.m{}_{}", n.name, i, j)));
      cells.push_back(m);
    }
    ValueId row = cells[0];
    if (cells.size() > 1) { HF2PTE_ASSIGN_OR_RETURN(row, g.add(OpId::CatOut, {cells, int64_t{-1}}, fmt::format("{}.row{}", n.name, i))); }
    row_vals.push_back(row);
  }
  ValueId y = row_vals[0];
  if (row_vals.size() > 1) { HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::CatOut, {graph::TensorList(row_vals), int64_t{-2}}, n.name)); }
  return replaced_by(y);
}

// ---- item 13: cummax / cummin ----

// cummax(x, d) -> values[i] = amax_j where(j <= i, x[j], -inf | i64 min) over x viewed
// [outer, 1(i), N(j), inner] against a lower-triangular keep-mask [N, N, 1];
// indices[i] = amax_j where(j <= i and x[j] == values[i], j, -1): the last
// position of the running max, as torch's (>=) scan gives. cummin: amin, max fill.
Replacement cumulative_to_masked_reduce(Graph& g, const Node& n, bool is_max) {
  ValueId x = std::get<ValueId>(n.args[0]);
  const TensorType xt = g.type(x);
  HF2PTE_ASSIGN_OR_RETURN(int d, node_dim(g, x, n.args[1]));
  if (xt.rank() == 0) return make_error(ErrorCode::kNotSupported, "cummax/cummin of a 0-d tensor");
  const SymInt& size_n = xt.sizes[size_t(d)];
  if (!size_n.is_constant()) return make_error(ErrorCode::kNotSupported, "cummax/cummin along symbolic dim {}", size_n.str());
  const int64_t N = size_n.constant_value();
  SymInt outer = product(xt.sizes, 0, size_t(d)), inner = product(xt.sizes, size_t(d) + 1, xt.sizes.size());
  double fill;
  switch (xt.dtype) {
    // -inf / +inf rather than the seed's finfo min/max: exact when x itself holds -inf / +inf.
    case ScalarType::kFloat:
    case ScalarType::kHalf:
    case ScalarType::kBFloat16: fill = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(); break;
    case ScalarType::kLong: fill = is_max ? double(std::numeric_limits<int64_t>::min()) : double(std::numeric_limits<int64_t>::max()); break;
    default: return make_error(ErrorCode::kNotSupported, "cummax/cummin of {}; expected f32 or i64", scalar_type_name(xt.dtype));
  }
  std::vector<uint8_t> keep(static_cast<size_t>(N * N));
  for (int64_t i = 0; i < N; ++i) for (int64_t j = 0; j < N; ++j) keep[size_t(i * N + j)] = j <= i;
  ValueId mask = bool_table(g, {N, N, 1}, keep, n.name + ".keep", fmt::format("j <= i [{}, {}, 1]", N, N));
  ValueId fill_v;
  if (xt.dtype == ScalarType::kLong) {
    fill_v = table_constant<int64_t>(g, ScalarType::kLong, {}, {is_max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max()},
                                     n.name + ".fill", is_max ? "i64 min" : "i64 max");
  } else {
    fill_v = typed_scalar(g, xt.dtype, fill, n.name + ".fill");
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId xj, contiguous_view(g, x, {outer, 1, N, inner}, n.name + ".xj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId masked, g.add(OpId::WhereSelfOut, {mask, xj, fill_v}, n.name + ".masked"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v3, g.add(is_max ? OpId::AmaxOut : OpId::AminOut, {masked, IntList{2}, false}, n.name + ".values3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId values, view(g, v3, xt.sizes, n.name + ".values"));
  // Indices: the last j <= i where x[j] equals the running value.
  HF2PTE_ASSIGN_OR_RETURN(ValueId vi, g.add(OpId::ViewCopyOut, {v3, IntList{outer, N, 1, inner}}, n.name + ".vi"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId hit, g.add(OpId::EqTensorOut, {xj, vi}, n.name + ".hit"));
  ValueId no = typed_scalar(g, ScalarType::kBool, 0, n.name + ".false");
  HF2PTE_ASSIGN_OR_RETURN(ValueId kept, g.add(OpId::WhereSelfOut, {mask, hit, no}, n.name + ".kept"));
  std::vector<int64_t> iota(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) iota[size_t(j)] = j;
  ValueId pos = table_constant<int64_t>(g, ScalarType::kLong, {N, 1}, iota, n.name + ".pos", fmt::format("arange({}) [{}, 1]", N, N));
  ValueId none = typed_scalar(g, ScalarType::kLong, -1, n.name + ".none");
  HF2PTE_ASSIGN_OR_RETURN(ValueId cand, g.add(OpId::WhereSelfOut, {kept, pos, none}, n.name + ".cand"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId i3, g.add(OpId::AmaxOut, {cand, IntList{2}, false}, n.name + ".indices3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId indices, view(g, i3, xt.sizes, n.name + ".indices"));
  return std::optional<std::vector<ValueId>>{std::vector<ValueId>{values, indices}};
}

// cummax(x, d) -> (amax_j where(j <= i, x_j, -inf), last j <= i with x_j == that max)
Replacement cummax_to_masked_amax(Graph& g, const Node& n) {
  if (n.op != OpId::Cummax) return no_match();
  return cumulative_to_masked_reduce(g, n, true);
}

// cummin(x, d) -> (amin_j where(j <= i, x_j, +inf), last j <= i with x_j == that min)
Replacement cummin_to_masked_amin(Graph& g, const Node& n) {
  if (n.op != OpId::Cummin) return no_match();
  return cumulative_to_masked_reduce(g, n, false);
}

// ---- item 14: bernoulli ----

// bernoulli(x, p) -> where(rand(x.shape) < p, 1, 0) in x's dtype (p = x itself for
// the tensor form). rand is aten::rand.out: upstream portable has no rand_like.
Replacement bernoulli_to_rand_lt(Graph& g, const Node& n) {
  if (n.op != OpId::Bernoulli && n.op != OpId::BernoulliP) return no_match();
  const TensorType xt = g.type(std::get<ValueId>(n.args[0]));
  if (xt.dtype != ScalarType::kFloat) return make_error(ErrorCode::kNotSupported, "bernoulli of {}; expected f32", xt.str());
  ValueId p;
  if (n.op == OpId::BernoulliP) {
    p = typed_scalar(g, xt.dtype, std::get<double>(n.args[1]), n.name + ".p");
  } else {
    HF2PTE_ASSIGN_OR_RETURN(p, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".contiguous"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId u, g.add(OpId::RandOut, {IntList(xt.sizes)}, n.name + ".uniform"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId hit, g.add(OpId::LtTensorOut, {u, p}, n.name + ".hit"));
  ValueId one = typed_scalar(g, xt.dtype, 1.0, n.name + ".one");
  ValueId zero = typed_scalar(g, xt.dtype, 0.0, n.name + ".zero");
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::WhereSelfOut, {hit, one, zero}, n.name));
  return replaced_by(y);
}

// ---- item 17: expand ----

// expand(x, sizes) -> expand_copy(x, sizes) when the result has a broadcast
// (stride-0) dim: a new leading dim or a size-1 dim grown. The copy is contiguous.
Replacement expand_to_copy(Graph& g, const Node& n) {
  if (n.op != OpId::Expand) return no_match();
  const auto out_sizes = g.type(n.outputs[0]).sizes;
  if (g.type(std::get<ValueId>(n.args[0])).sizes == out_sizes) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, contiguous(g, std::get<ValueId>(n.args[0]), n.name + ".contiguous"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::ExpandCopyOut, {x, IntList(out_sizes)}, n.name));
  return replaced_by(y);
}

// expand(x, sizes) with sizes == x.sizes (only -1s or equal sizes) -> x.
Replacement expand_without_broadcast_is_identity(Graph& g, const Node& n) {
  if (n.op != OpId::Expand) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  if (!(g.type(x).sizes == g.type(n.outputs[0]).sizes)) return no_match();
  return replaced_by(x);
}

// ---- item 18: views ----

// reshape/view(x) with a strided x -> view_copy(_to_dim_order_copy(x, dim_order=None), sizes):
// the contiguous clone first, because view_copy reinterprets contiguous bytes.
Replacement reshape_clones_noncontiguous(Graph& g, const Node& n) {
  if (n.op != OpId::Reshape && n.op != OpId::View) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  if (is_contiguous(g.type(x))) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId c, contiguous(g, x, n.name + ".contiguous"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::ViewCopyOut, {c, IntList(g.type(n.outputs[0]).sizes)}, n.name));
  return replaced_by(y);
}

// reshape/view(x) with a contiguous x -> view_copy(x, sizes) (-1 resolved).
Replacement reshape_to_view_copy(Graph& g, const Node& n) {
  if (n.op != OpId::Reshape && n.op != OpId::View) return no_match();
  if (!is_contiguous(g.type(std::get<ValueId>(n.args[0])))) return no_match();
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, view(g, std::get<ValueId>(n.args[0]), g.type(n.outputs[0]).sizes, n.name));
  return replaced_by(y);
}

// permute/transpose view(x, p) -> _to_dim_order_copy(permute_copy(x, p), dim_order = the
// view's): same values and same strided layout as the view, so consumers keep
// their types (and reshape still sees a non-contiguous input). Identity layouts
// need only the permute_copy.
Replacement permute_view_to_copy(Graph& g, const Node& n) {
  if (n.op != OpId::Permute && n.op != OpId::TransposeInt) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  const TensorType out = g.type(n.outputs[0]);
  IntList perm;
  if (n.op == OpId::Permute) {
    perm = std::get<IntList>(n.args[1]);
  } else {
    HF2PTE_ASSIGN_OR_RETURN(int d0, node_dim(g, x, n.args[1]));
    HF2PTE_ASSIGN_OR_RETURN(int d1, node_dim(g, x, n.args[2]));
    for (int i = 0; i < out.rank(); ++i) perm.emplace_back(i == d0 ? d1 : i == d1 ? d0 : i);
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId c, contiguous(g, x, n.name + ".contiguous"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::PermuteCopyOut, {c, perm}, n.name + (is_contiguous(out) ? "" : ".copy")));
  if (!is_contiguous(out)) {
    IntList order;
    for (auto o : out.dim_order) order.emplace_back(int64_t{o});
    HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::ToDimOrderCopyOut, {y, false, order}, n.name));
  }
  return replaced_by(y);
}
}  // namespace

namespace {

/// A rule and the op it lowers (for the capability check below).
struct SourcedRule {
  Rule rule;
  OpId source;
};

// Sets follow the seed (docs/pipeline.md "Decomposition rule sets"):
//  fused     - fused ops no backend here has a kernel for (hf2pte's own builders);
//  all       - the seed's rules for every backend (items 8, 10-14, 17, 18);
//  cuda-only - the seed's CUDA rules (items 5-7, 9). They also run for any backend
//              whose kernel table lacks the source op: hf2pte has no kernel row for
//              split/chunk/topk/avg_pool2d, and the emitter refuses multi-output ops.
std::vector<RuleSet> all_rule_sets() {
  return {
      {"fused", {{"linear_to_mm", linear_to_mm}, {"rms_norm_to_primitives", rms_norm_to_primitives},
                 {"silu_to_sigmoid_mul", silu_to_sigmoid_mul}, {"sdpa_to_math", sdpa_to_math},
                 {"to_copy_to_dim_order_copy", to_copy_to_dim_order_copy}}},
      {"all", {{"detach_to_identity", detach_to_identity},
               {"bucketize_to_compare_sum", bucketize_to_compare_sum},
               {"searchsorted_to_compare_sum", searchsorted_to_compare_sum},
               {"adaptive_avg_pool2d_to_avg_pool2d", adaptive_avg_pool2d_to_avg_pool2d},
               {"adaptive_avg_pool2d_to_windows", adaptive_avg_pool2d_to_windows},
               {"cummax_to_masked_amax", cummax_to_masked_amax},
               {"cummin_to_masked_amin", cummin_to_masked_amin},
               {"bernoulli_to_rand_lt", bernoulli_to_rand_lt},
               {"expand_to_copy", expand_to_copy},
               {"expand_without_broadcast_is_identity", expand_without_broadcast_is_identity},
               {"reshape_clones_noncontiguous", reshape_clones_noncontiguous},
               {"reshape_to_view_copy", reshape_to_view_copy},
               {"permute_view_to_copy", permute_view_to_copy}}},
      {"cuda-only", {{"split_to_narrow", split_to_narrow},
                     {"chunk_to_narrow", chunk_to_narrow},
                     {"topk_to_argsort_gather", topk_to_argsort_gather},
                     {"avg_pool2d_to_depthwise_conv", avg_pool2d_to_depthwise_conv}}},
  };
}

/// The op each cuda-only rule lowers.
OpId cuda_rule_source(std::string_view rule) {
  if (rule == "split_to_narrow") return OpId::SplitTensor;
  if (rule == "chunk_to_narrow") return OpId::Chunk;
  if (rule == "topk_to_argsort_gather") return OpId::Topk;
  return OpId::AvgPool2d;
}

}  // namespace

std::vector<RuleSet> decomposition_rule_sets(Backend backend) {
  std::vector<RuleSet> sets;
  for (auto& set : all_rule_sets()) {
    if (std::string_view(set.name) == "cuda-only" && backend != Backend::kCuda) {
      // Non-CUDA backends need these only for ops with no kernel row here.
      std::vector<Rule> kept;
      for (auto& r : set.rules) {
        if (!op_info(cuda_rule_source(r.name)).has_kernel) kept.push_back(std::move(r));
      }
      set.rules = std::move(kept);
    }
    if (!set.rules.empty()) sets.push_back(std::move(set));
  }
  return sets;
}

std::vector<Rule> decomposition_rules(Backend backend) {
  std::vector<Rule> rules;
  for (auto& set : decomposition_rule_sets(backend)) {
    for (auto& r : set.rules) rules.push_back(std::move(r));
  }
  return rules;
}

Status run_decompositions(graph::Program& p, const ExportConfig& c, StageLog& log) {
  const auto sets = decomposition_rule_sets(c.backend);
  std::vector<Rule> rules;
  std::map<std::string, std::string> set_of;
  for (const auto& set : sets) {
    for (const auto& r : set.rules) {
      rules.push_back(r);
      set_of[r.name] = set.name;
    }
  }
  for (auto& g : p.methods) {
    HF2PTE_ASSIGN_OR_RETURN(RuleCounts counts, rewrite_to_fixed_point(g, rules));
    std::string fired;
    for (const auto& [name, n] : counts) {
      fired += fmt::format("{}{} x{} [{}]", fired.empty() ? "" : ", ", name, n, set_of[name]);
    }
    log.notes.push_back(g.name() + ": " + (fired.empty() ? "no rule fired" : fired));
  }
  return Status::ok();
}

}  // namespace hf2pte::exp
