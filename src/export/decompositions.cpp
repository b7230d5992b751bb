#include "export/decompositions.h"

#include <cmath>
#include <limits>

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

ValueId scalar_constant(Graph& g, ScalarType dtype, float value, const std::string& name) {
  std::vector<uint8_t> bytes(sizeof(float));
  std::memcpy(bytes.data(), &value, sizeof(float));
  return g.add_constant(name, graph::ConstantData::from_bytes(dtype, {}, std::move(bytes), fmt::format("scalar {}", value)));
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
Replacement rms_norm_to_primitives(Graph& g, const Node& n) {
  if (n.op != OpId::RmsNorm) return no_match();
  ValueId x = std::get<ValueId>(n.args[0]);
  const auto& norm_shape = std::get<IntList>(n.args[1]);
  if (norm_shape.size() != 1) {
    return make_error(ErrorCode::kNotSupported, "rms_norm over {} dims is not supported; expected 1", norm_shape.size());
  }
  double eps = std::holds_alternative<double>(n.args[3]) ? std::get<double>(n.args[3])
                                                         : double(std::numeric_limits<float>::epsilon());
  HF2PTE_ASSIGN_OR_RETURN(ValueId sq, g.add(OpId::PowTensorScalarOut, {x, 2.0}, n.name + ".sq"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ms, g.add(OpId::MeanOut, {sq, IntList{-1}, true}, n.name + ".mean"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ve, g.add(OpId::AddScalarOut, {ms, eps}, n.name + ".var_eps"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId r, g.add(OpId::RsqrtOut, {ve}, n.name + ".rstd"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::MulOut, {x, r}, n.name + (std::holds_alternative<None>(n.args[2]) ? "" : ".normed")));
  if (const auto* w = std::get_if<ValueId>(&n.args[2])) {
    HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::MulOut, {*w, y}, n.name));
  }
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

// sdpa(q, k, v, mask, scale) -> softmax(q k^T * scale [masked]) v, GQA by grouping
// query heads: q [.., Hq, L, D] viewed as [B*Hkv, g*L, D] shares k/v [B*Hkv, S, D].
Replacement sdpa_to_math(Graph& g, const Node& n) {
  if (n.op != OpId::ScaledDotProductAttention) return no_match();
  ValueId q = std::get<ValueId>(n.args[0]), k = std::get<ValueId>(n.args[1]), v = std::get<ValueId>(n.args[2]);
  const auto qs = g.type(q).sizes;  // copies: adding values reallocates the value table
  const auto ks = g.type(k).sizes;
  const auto vs = g.type(v).sizes;
  size_t r = qs.size();
  if (r < 3) return make_error(ErrorCode::kNotSupported, "sdpa on rank-{} query; expected rank >= 3", r);
  if (std::get<bool>(n.args[5])) {
    return make_error(ErrorCode::kNotSupported, "sdpa with is_causal=True; pass an explicit mask");
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
  SymInt batch = product(qs, 0, r - 3) * hkv;
  const SymInt& L = qs[r - 2];
  const SymInt& S = ks[r - 2];
  double scale = std::holds_alternative<double>(n.args[6]) ? std::get<double>(n.args[6])
                                                          : 1.0 / std::sqrt(double(qs.back().constant_value()));

  HF2PTE_ASSIGN_OR_RETURN(ValueId q3, view(g, q, {batch, L * group, qs.back()}, n.name + ".q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId k3, view(g, k, {batch, S, ks.back()}, n.name + ".k"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v3, view(g, v, {batch, S, vs.back()}, n.name + ".v"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId kt, g.add(OpId::PermuteCopyOut, {k3, IntList{0, 2, 1}}, n.name + ".kT"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId scores, g.add(OpId::BmmOut, {q3, kt}, n.name + ".qk"));
  HF2PTE_ASSIGN_OR_RETURN(scores, g.add(OpId::MulScalarOut, {scores, scale}, n.name + ".scores"));
  if (const auto* mask = std::get_if<ValueId>(&n.args[3])) {
    // Masks of shape [L, S] (or with leading 1s) broadcast over [batch, group, L, S].
    const TensorType mt = g.type(*mask);
    for (size_t i = 0; i + 2 < mt.sizes.size(); ++i) {
      if (!(mt.sizes[i] == SymInt(1))) {
        return make_error(ErrorCode::kNotSupported, "sdpa: per-head or per-batch masks are not supported yet ({})", mt.str());
      }
    }
    HF2PTE_ASSIGN_OR_RETURN(ValueId s4, view(g, scores, {batch, group, L, S}, n.name + ".scores4"));
    if (mt.dtype == ScalarType::kBool) {
      ValueId ninf = scalar_constant(g, g.type(scores).dtype, -std::numeric_limits<float>::infinity(), n.name + ".neg_inf");
      HF2PTE_ASSIGN_OR_RETURN(s4, g.add(OpId::WhereSelfOut, {*mask, s4, ninf}, n.name + ".masked"));
    } else {
      HF2PTE_ASSIGN_OR_RETURN(s4, g.add(OpId::AddOut, {s4, *mask}, n.name + ".masked"));
    }
    HF2PTE_ASSIGN_OR_RETURN(scores, view(g, s4, {batch, L * group, S}, n.name + ".masked3"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId p, g.add(OpId::SoftmaxOut, {scores, int64_t{-1}, false}, n.name + ".probs"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId o, g.add(OpId::BmmOut, {p, v3}, n.name + ".pv"));
  IntList out_sizes(qs.begin(), qs.end() - 1);
  out_sizes.push_back(vs.back());
  HF2PTE_ASSIGN_OR_RETURN(ValueId out, view(g, o, out_sizes, n.name));
  return replaced_by(out);
}

}  // namespace

std::vector<Rule> decomposition_rules(Backend backend) {
  // Every backend here lacks these fused ops as kernels; XNNPACK- and
  // CUDA-specific sets join this list with the backends (issue: pipeline).
  (void)backend;
  return {
      {"linear_to_mm", linear_to_mm},
      {"rms_norm_to_primitives", rms_norm_to_primitives},
      {"silu_to_sigmoid_mul", silu_to_sigmoid_mul},
      {"sdpa_to_math", sdpa_to_math},
  };
}

Status run_decompositions(graph::Program& p, const ExportConfig& c, StageLog& log) {
  auto rules = decomposition_rules(c.backend);
  for (auto& g : p.methods) {
    HF2PTE_ASSIGN_OR_RETURN(RuleCounts counts, rewrite_to_fixed_point(g, rules));
    std::string fired;
    for (const auto& [name, n] : counts) fired += (fired.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    log.notes.push_back(g.name() + ": " + (fired.empty() ? "no rule fired" : fired));
  }
  return Status::ok();
}

}  // namespace hf2pte::exp
