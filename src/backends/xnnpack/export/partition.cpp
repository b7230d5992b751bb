#include "backends/xnnpack/export/partition.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "backends/xnnpack/export/serialize.h"
#include "core/half.h"
#include "kernels/optimized/simd_kernels.h"
#include "graph/delegate_call.h"
#include "quant/quant.h"
#include "backends/xnnpack/export/sha256.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"

namespace hf2pte::xnn {

namespace {

using graph::Arg;
using graph::Graph;
using graph::IntList;
using graph::Node;
using graph::SymInt;
using graph::ValueId;
using K = fb_xnnpack::XNodeUnion;

constexpr int kMaxRank = 6;

/// The element types an XNNPACK graph value can have here: fp32, and fp16
/// (XNNPACK has no bf16 tensors; bf16 appears only as group-quant scales).
bool is_xnn_float(ScalarType t) { return t == ScalarType::kFloat || t == ScalarType::kHalf; }

fb_xnnpack::XNNDatatype xnn_datatype(ScalarType t) {
  return t == ScalarType::kHalf ? fb_xnnpack::XNNDatatype::fp16 : fb_xnnpack::XNNDatatype::fp32;
}

std::optional<int64_t> const_int(const Arg& a) {
  if (const auto* v = std::get_if<int64_t>(&a)) return *v;
  if (const auto* s = std::get_if<SymInt>(&a); s && s->is_constant()) return s->constant_value();
  return std::nullopt;
}
bool is_one(const Arg& a) {
  if (const auto* v = std::get_if<int64_t>(&a)) return *v == 1;
  if (const auto* v = std::get_if<double>(&a)) return *v == 1.0;
  return false;
}
std::optional<ValueId> tensor(const Arg& a) {
  if (const auto* v = std::get_if<ValueId>(&a)) return *v;
  return std::nullopt;
}

/// Layout a claimed node computes in (Plan::layout).
enum class Layout : uint8_t { kGraph, kChannelsLast, kFollow };

/// A claimed node, decided before any rewrite.
struct Plan {
  K kind = K::NONE;
  std::vector<ValueId> operands;  ///< graph values in XNNPACK id order (without the output)
  uint32_t flags = 0;
  std::vector<uint32_t> list1, list2;
  uint32_t axis = 0;
  bool fc_constants = false;  ///< operands[1] (filter) and operands[2] (bias, optional) are named constants
  bool folded = false;        ///< a transpose folded into its BatchMatMul user: emits nothing
  /// A quantized FullyConnected (quantized_decomposed::mixed_linear): the
  /// filter's recipe and its scales constant.
  std::optional<graph::QuantInfo> filter_quant;
  ValueId filter_scales = -1;
  /// The input is quantized per token at run time (a qdint8 value made by a
  /// Convert node): the choose/quantize/dequantize_per_token chain folded in.
  bool dynamic_input = false;
  /// Where the node computes: NCHW graph layout, channels-last (conv and
  /// pooling: activation operands read as NHWC, output NHWC), or the layout
  /// its operands already have (elementwise ops, see lower_run).
  Layout layout = Layout::kGraph;
  XnnWindowSpec window{};  ///< Conv2d, MaxPooling2d
  std::optional<std::pair<float, float>> output_min_max;  ///< a fused clamp, or Clamp's own bounds
  /// The value the node writes when it is not nodes[i].outputs[0]: the output
  /// of a clamp fused into it.
  ValueId output = -1;
};

ValueId output_of(const Node& n, const Plan& p) { return p.output >= 0 ? p.output : n.outputs[0]; }

/// XNN_FLAG_TRANSPOSE_WEIGHTS of xnn_define_fully_connected: the filter is [k, n].
constexpr uint32_t kFcTransposeFilter = 0x1;
/// An fp16 filter W^T [k, n] of an fp32 node whose input is longer than 4096
/// floats and whose output is at most 4096 is written [k, n] with
/// TRANSPOSE_WEIGHTS: a row-major [n, k] row dot x needs all of x (more than
/// 16 KiB) in L1 beside the weight stream, and on a 32 KiB L1 x falls out
/// (bench-1b's down projection, k = 5632: 23-25 GB/s against 30-32 with x at
/// 8 KiB, Zen 4), while [k, n] streams as row chunks into partial outputs of
/// n floats (34 GB/s, same run). docs/decisions.md, "K-major filters".
bool k_major_filter(ScalarType filter_dtype, ScalarType node_dtype, const std::vector<int64_t>& kn) {
  return filter_dtype == ScalarType::kHalf && node_dtype == ScalarType::kFloat && kn.size() == 2 && kn[0] > 4096 &&
         kn[1] <= 4096;
}

/// XNN_FLAG_TRANSPOSE_B of xnn_define_batch_matrix_multiply (upstream passes the node's flags).
constexpr uint32_t kBmmTransposeB = 0x1;
/// XNN_FLAG_KEEP_DIMS: upstream's writer sets it on pooling nodes.
constexpr uint32_t kKeepDims = 0x40;

/// bmm(a, permute(k, [.., r-1, r-2])) where the permute's output has no other
/// use becomes one BatchMatMul with transpose_b reading k: the attention's
/// q . k^T no longer copies the whole KV cache transposed every step.
/// `last_use` of k moves to the BatchMatMul (it may sit in a later run).
void fold_transposes_into_bmm(const std::vector<Node>& nodes, std::vector<std::optional<Plan>>& plans,
                              const std::unordered_map<ValueId, int>& uses,
                              std::unordered_map<ValueId, size_t>& last_use) {
  std::unordered_map<ValueId, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) if (plans[i]) producer[nodes[i].outputs[0]] = i;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!plans[i] || plans[i]->kind != K::XNNBatchMatrixMultiply || plans[i]->flags != 0) continue;
    const ValueId kt = plans[i]->operands[1];
    auto it = producer.find(kt);
    if (it == producer.end() || plans[it->second]->kind != K::XNNStaticTranspose) continue;
    if (auto u = uses.find(kt); u == uses.end() || u->second != 1) continue;
    const auto& perm = plans[it->second]->list1;
    const size_t r = perm.size();
    bool swaps_last_two = r >= 2 && perm[r - 1] == r - 2 && perm[r - 2] == r - 1;
    for (size_t d = 0; d + 2 < r; ++d) swaps_last_two = swaps_last_two && perm[d] == d;
    if (!swaps_last_two) continue;
    const ValueId k = plans[it->second]->operands[0];
    plans[i]->operands[1] = k;
    plans[i]->flags = kBmmTransposeB;
    last_use[k] = std::max(last_use[k], i);
    plans[it->second]->folded = true;
  }
}

/// mixed_linear(dequantize_per_token(quantize_per_token(x, s, z), s, z)) with
/// (s, z) = choose_qparams_per_token_asymmetric(x), every intermediate used only
/// inside the chain: the FullyConnected reads x through a qdint8 Convert
/// (XNNPACK computes the per-token parameters itself), the three nodes emit nothing.
void fold_dynamic_quant_into_fc(const Graph& g, const std::vector<Node>& nodes, std::vector<std::optional<Plan>>& plans,
                                const std::unordered_map<ValueId, int>& uses,
                                std::unordered_map<ValueId, size_t>& last_use) {
  std::unordered_map<ValueId, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) for (auto o : nodes[i].outputs) producer[o] = i;
  auto produced_by = [&](ValueId v, OpId op) -> std::optional<size_t> {
    auto it = producer.find(v);
    if (it == producer.end() || nodes[it->second].op != op) return std::nullopt;
    return it->second;
  };
  auto used = [&](ValueId v) { auto it = uses.find(v); return it == uses.end() ? 0 : it->second; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!plans[i] || !plans[i]->filter_quant) continue;
    const ValueId xd = plans[i]->operands[0];
    auto d = produced_by(xd, OpId::DequantizePerTokenOut);
    if (!d || used(xd) != 1) continue;
    const auto& da = nodes[*d].args;
    auto q = produced_by(std::get<ValueId>(da[0]), OpId::QuantizePerTokenOut);
    if (!q || used(nodes[*q].outputs[0]) != 1) continue;
    const auto& qa = nodes[*q].args;
    auto c = produced_by(std::get<ValueId>(qa[1]), OpId::ChooseQparamsPerTokenAsymmetricOut);
    if (!c) continue;
    const Node& cn = nodes[*c];
    const ValueId x = std::get<ValueId>(cn.args[0]);
    const bool same_params = std::get<ValueId>(qa[0]) == x && std::get<ValueId>(qa[1]) == cn.outputs[0] &&
                             std::get<ValueId>(qa[2]) == cn.outputs[1] && std::get<ValueId>(da[1]) == cn.outputs[0] &&
                             std::get<ValueId>(da[2]) == cn.outputs[1];
    if (!same_params || used(cn.outputs[0]) != 2 || used(cn.outputs[1]) != 2) continue;
    if (g.type(x).dtype != ScalarType::kFloat || g.type(x).rank() != 2) continue;
    for (size_t k : {*c, *q, *d}) {
      plans[k] = Plan{};
      plans[k]->folded = true;
    }
    plans[i]->operands[0] = x;
    plans[i]->dynamic_input = true;
    last_use[x] = std::max(last_use[x], i);
  }
}

/// The exact GELU as the builders spell it, mul(mul.Scalar(x, 0.5),
/// add.Scalar(erf(mul.Scalar(x, 1/sqrt(2))), 1)), every intermediate used
/// once, x fp32: one Gelu node (upstream's partitioner takes aten.gelu the
/// same way) in place of five kernel calls and their four temporaries.
void fold_erf_gelu(const Graph& g, const std::vector<Node>& nodes, std::vector<std::optional<Plan>>& plans,
                   const std::unordered_map<ValueId, int>& uses) {
  std::unordered_map<ValueId, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) for (auto o : nodes[i].outputs) producer[o] = i;
  auto once = [&](ValueId v) { auto it = uses.find(v); return it != uses.end() && it->second == 1; };
  auto scalar = [](const Arg& a) -> std::optional<double> {
    if (const auto* d = std::get_if<double>(&a)) return *d;
    if (const auto* i = std::get_if<int64_t>(&a)) return double(*i);
    return std::nullopt;
  };
  // The node producing `v` when it is `op` with a single use, else nullopt.
  auto single_use = [&](ValueId v, OpId op) -> std::optional<size_t> {
    auto it = producer.find(v);
    if (it == producer.end() || nodes[it->second].op != op || !once(v)) return std::nullopt;
    return it->second;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!plans[i] || plans[i]->kind != K::XNNMultiply || plans[i]->folded) continue;
    for (int swap = 0; swap < 2; ++swap) {
      auto h = single_use(plans[i]->operands[swap], OpId::MulScalarOut);
      auto e1 = single_use(plans[i]->operands[1 - swap], OpId::AddScalarOut);
      if (!h || !e1 || scalar(nodes[*h].args[1]) != std::optional<double>(0.5)) continue;
      const auto& add = nodes[*e1].args;
      if (scalar(add[1]) != std::optional<double>(1.0) || (add.size() > 2 && scalar(add[2]) != std::optional<double>(1.0))) continue;
      auto e = single_use(std::get<ValueId>(add[0]), OpId::ErfOut);
      if (!e) continue;
      auto t = single_use(std::get<ValueId>(nodes[*e].args[0]), OpId::MulScalarOut);
      if (!t) continue;
      const auto c = scalar(nodes[*t].args[1]);
      const ValueId x = std::get<ValueId>(nodes[*t].args[0]);
      if (!c || std::abs(*c - M_SQRT1_2) > 1e-7 || std::get<ValueId>(nodes[*h].args[0]) != x ||
          g.type(x).dtype != ScalarType::kFloat || g.value(x).role == graph::ValueRole::kConstant) {
        continue;
      }
      for (size_t k : {*h, *e1, *e, *t}) {
        plans[k] = Plan{};
        plans[k]->folded = true;
      }
      plans[i]->kind = K::XNNGelu;
      plans[i]->operands = {x};
      break;
    }
  }
}

/// clamp(y) where y comes from a claimed Conv2d / Add / MaxPooling2d and has
/// no other use, every node between them claimed (one run): the bounds become
/// the producer's output_min_max (upstream fuses relu the same way) and the
/// clamp emits nothing.
void fuse_clamps(const std::vector<Node>& nodes, std::vector<std::optional<Plan>>& plans,
                 const std::unordered_map<ValueId, int>& uses) {
  std::unordered_map<ValueId, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) if (plans[i] && !plans[i]->folded) producer[output_of(nodes[i], *plans[i])] = i;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!plans[i] || plans[i]->kind != K::XNNClamp || plans[i]->folded) continue;
    const ValueId y = plans[i]->operands[0];
    auto it = producer.find(y);
    if (it == producer.end()) continue;
    Plan& p = *plans[it->second];
    if ((p.kind != K::XNNConv2d && p.kind != K::XNNAdd && p.kind != K::XNNMaxPooling2d) || p.output_min_max) continue;
    if (auto u = uses.find(y); u == uses.end() || u->second != 1) continue;
    bool one_run = true;
    for (size_t k = it->second; k < i; ++k) one_run = one_run && plans[k].has_value();
    if (!one_run) continue;
    p.output_min_max = plans[i]->output_min_max;
    p.output = nodes[i].outputs[0];
    producer[p.output] = it->second;
    plans[i]->folded = true;
  }
}

/// Bounds of a clamp argument: a number, or None (unbounded).
std::optional<float> clamp_bound(const Arg& a, float unbounded) {
  if (std::holds_alternative<graph::None>(a)) return unbounded;
  if (const auto* v = std::get_if<double>(&a)) return float(*v);
  if (const auto* v = std::get_if<int64_t>(&a)) return float(*v);
  return std::nullopt;
}

/// A padding list of a conv/pool: [p] or [ph, pw], constant, >= 0.
std::optional<std::pair<uint32_t, uint32_t>> pair_arg(const Arg& a, int64_t dflt, int64_t min) {
  const auto* l = std::get_if<IntList>(&a);
  if (l == nullptr || l->size() > 2) return std::nullopt;
  int64_t v[2] = {dflt, dflt};
  for (size_t i = 0; i < 2 && !l->empty(); ++i) {
    const SymInt& d = (*l)[l->size() == 1 ? 0 : i];
    if (!d.is_constant() || d.constant_value() < min || d.constant_value() > INT32_MAX) return std::nullopt;
    v[i] = d.constant_value();
  }
  return std::pair{uint32_t(v[0]), uint32_t(v[1])};
}

class Claimer {
 public:
  Claimer(const Graph& g, const PartitionOptions& o, const std::unordered_map<ValueId, int>& uses)
      : g_(g), o_(o), uses_(uses) {}

  /// fp32 or fp16, contiguous, every dim bounded, rank <= 6.
  bool plain(ValueId v) const {
    const auto& val = g_.value(v);
    if (val.role == graph::ValueRole::kSymInt) return false;
    const auto& t = val.type;
    if (!is_xnn_float(t.dtype) || t.rank() > kMaxRank) return false;
    for (size_t i = 0; i < t.dim_order.size(); ++i) if (t.dim_order[i] != i) return false;
    for (auto b : t.upper_bounds(g_.dims())) if (b <= 0 || b == graph::DimRange::kUnbounded || b > INT32_MAX) return false;
    return true;
  }
  bool is_const(ValueId v) const { return g_.value(v).role == graph::ValueRole::kConstant; }

  std::optional<Plan> claim(const Node& n) const {
    // max_pool2d_with_indices whose indices nothing reads is a MaxPooling2d.
    const bool values_only = n.op == OpId::MaxPool2dWithIndicesOut && n.outputs.size() == 2 && !uses_.count(n.outputs[1]);
    if ((n.outputs.size() != 1 && !values_only) || !plain(n.outputs[0])) return std::nullopt;
    auto p = claim_op(n);
    if (!p) return std::nullopt;
    // One float datatype per node (upstream's partitioner: no mixed input
    // dtypes): an fp16 model's graph is claimed as fp16, and the casts between
    // its fp16 and fp32 parts stay on the portable kernels.
    const ScalarType dt = g_.type(n.outputs[0]).dtype;
    // A Convert's input has the other float datatype: the place where the
    // graph changes precision, inside the delegate.
    const bool converts = p->kind == K::XNNConvert;
    for (size_t k = 0; k < p->operands.size(); ++k) {
      if (converts) {
        if (!plain(p->operands[k])) return std::nullopt;
        continue;
      }
      if (p->filter_quant && k >= 1) continue;  // the quantized filter: int8 bytes by design
      if (!plain(p->operands[k])) return std::nullopt;
      const bool weight = p->fc_constants && k >= 1;  // written in the datatype its node takes (lower_run)
      if (!weight && g_.type(p->operands[k]).dtype != dt) return std::nullopt;
    }
    return p;
  }

 private:
  std::optional<Plan> claim_op(const Node& n) const {
    const auto& a = n.args;
    const auto& out = g_.type(n.outputs[0]);
    Plan p;
    switch (n.op) {
      case OpId::MmOut:
      case OpId::AddmmOut: {
        // mm(x, W^T) / addmm(b, x, W^T): FullyConnected, filter [in, out] with flag 0x1.
        bool addmm = n.op == OpId::AddmmOut;
        auto x = tensor(a[addmm ? 1 : 0]), w = tensor(a[addmm ? 2 : 1]);
        if (!x || !w || is_const(*x) || !is_const(*w) || g_.type(*w).rank() != 2) return std::nullopt;
        p.kind = K::XNNFullyConnected;
        p.operands = {*x, *w};
        p.flags = kFcTransposeFilter;
        p.fc_constants = true;
        if (addmm) {
          auto b = tensor(a[0]);
          if (!b || !is_const(*b) || g_.type(*b).rank() != 1 || !is_one(a[3]) || !is_one(a[4])) return std::nullopt;
          p.operands.push_back(*b);
        }
        return p;
      }
      case OpId::MixedLinearOut: {
        // mixed_linear(x, Wq, scales): FullyConnected with a quantized filter
        // [n, k] (flag 0) -- qcint8 / qcint4 per channel, qbint4 per block of a
        // multiple of 32 (what upstream's XNNPACK writer asserts). 8-bit blocks
        // have no XNNPACK datatype and stay on the portable kernel.
        auto x = tensor(a[0]), w = tensor(a[1]), sc = tensor(a[2]);
        if (!x || !w || !sc || is_const(*x) || !is_const(*w) || !is_const(*sc)) return std::nullopt;
        if (!std::holds_alternative<graph::None>(a[3])) return std::nullopt;
        const auto& q = g_.constant(*w).quant;
        if (!q || q->is_scales || (q->bits == 8 && q->group != 0) || (q->group != 0 && q->group % 32 != 0)) return std::nullopt;
        p.kind = K::XNNFullyConnected;
        p.operands = {*x, *w};
        p.fc_constants = true;
        p.filter_quant = *q;
        p.filter_scales = *sc;
        return p;
      }
      default:
        break;
    }
    if (o_.linear_only) return std::nullopt;
    auto binary = [&](K k) -> std::optional<Plan> {
      auto x = tensor(a[0]), y = tensor(a[1]);
      if (!x || !y) return std::nullopt;
      p.kind = k;
      p.operands = {*x, *y};
      return p;
    };
    auto unary = [&](K k) -> std::optional<Plan> {
      auto x = tensor(a[0]);
      if (!x) return std::nullopt;
      p.kind = k;
      p.operands = {*x};
      return p;
    };
    auto elementwise = [&](std::optional<Plan> q) {
      if (q) q->layout = Layout::kFollow;
      return q;
    };
    switch (n.op) {
      case OpId::ConvolutionOut: return claim_conv(n);
      case OpId::MaxPool2dWithIndicesOut: return claim_max_pool(n);
      case OpId::MeanOut: {
        // mean over H and W, keepdim, of a 4-D tensor: GlobalAvgPooling2d (NHWC, flag KEEP_DIMS).
        auto x = tensor(a[0]);
        const auto* dims = std::get_if<IntList>(&a[1]);
        const auto* keep = std::get_if<bool>(&a[2]);
        if (!x || !dims || !keep || !*keep || !std::holds_alternative<graph::None>(a[3]) || g_.type(*x).rank() != 4 ||
            dims->size() != 2) {
          return std::nullopt;
        }
        std::set<int64_t> want;
        for (const auto& d : *dims) {
          if (!d.is_constant()) return std::nullopt;
          want.insert(d.constant_value() < 0 ? d.constant_value() + 4 : d.constant_value());
        }
        if (want != std::set<int64_t>{2, 3}) return std::nullopt;
        auto q = unary(K::XNNGlobalAvgPooling2d);
        q->layout = Layout::kChannelsLast;
        q->flags = kKeepDims;
        return q;
      }
      case OpId::ClampOut: {
        auto lo = clamp_bound(a[1], -std::numeric_limits<float>::infinity());
        auto hi = clamp_bound(a[2], std::numeric_limits<float>::infinity());
        if (!lo || !hi || std::isnan(*lo) || std::isnan(*hi) || *lo > *hi) return std::nullopt;
        auto q = elementwise(unary(K::XNNClamp));
        q->output_min_max = std::pair{*lo, *hi};
        return q;
      }
      case OpId::AddOut: return is_one(a[2]) ? elementwise(binary(K::XNNAdd)) : std::nullopt;
      case OpId::SubOut: return is_one(a[2]) ? elementwise(binary(K::XNNSubtract)) : std::nullopt;
      case OpId::MulOut: return elementwise(binary(K::XNNMultiply));
      case OpId::DivOut: return elementwise(binary(K::XNNDiv));
      case OpId::BmmOut: return binary(K::XNNBatchMatrixMultiply);
      case OpId::NegOut: return unary(K::XNNNegate);
      case OpId::RsqrtOut: return unary(K::XNNReciprocalSquareRoot);
      case OpId::SigmoidOut: return unary(K::XNNSigmoid);
      case OpId::TanhOut: return unary(K::XNNTanh);
      case OpId::PowTensorScalarOut: {
        // pow(x, 2) -> Square (upstream: exponent int 2)
        bool two = (std::holds_alternative<int64_t>(a[1]) && std::get<int64_t>(a[1]) == 2) ||
                   (std::holds_alternative<double>(a[1]) && std::get<double>(a[1]) == 2.0);
        return two ? unary(K::XNNSquare) : std::nullopt;
      }
      case OpId::SoftmaxOut: {
        auto dim = const_int(a[1]);
        auto x = tensor(a[0]);
        if (!x || !dim || (*dim != -1 && *dim != g_.type(*x).rank() - 1)) return std::nullopt;
        if (const auto* h = std::get_if<bool>(&a[2]); h && *h) return std::nullopt;
        return unary(K::XNNSoftmax);
      }
      case OpId::CloneOut:
        if (!std::holds_alternative<graph::None>(a[1])) return std::nullopt;
        return unary(K::XNNCopy);
      case OpId::ToDimOrderCopyOut: {
        // fp16 <-> fp32 in the same layout: a Convert (XNNPACK's
        // xnn_define_convert takes both directions; docs/decisions.md,
        // "Casts inside XNNPACK fp16 graphs").
        auto x = tensor(a[0]);
        if (!x || !std::holds_alternative<graph::None>(a[2]) || g_.type(*x).dtype == out.dtype) return std::nullopt;
        return elementwise(unary(K::XNNConvert));
      }
      case OpId::PermuteCopyOut: {
        auto x = tensor(a[0]);
        const auto* dims = std::get_if<IntList>(&a[1]);
        if (!x || !dims || int(dims->size()) != g_.type(*x).rank()) return std::nullopt;
        for (const auto& d : *dims) {
          if (!d.is_constant()) return std::nullopt;
          int64_t v = d.constant_value();
          if (v < 0) v += int64_t(dims->size());
          if (v < 0 || v >= int64_t(dims->size())) return std::nullopt;
          p.list1.push_back(uint32_t(v));
        }
        return unary(K::XNNStaticTranspose);
      }
      case OpId::ViewCopyOut: {
        // new_shape = output sizes, the (single) symbolic dim as 0 = inferred.
        int symbolic = 0;
        for (const auto& s : out.sizes) {
          if (s.is_constant()) {
            if (s.constant_value() <= 0) return std::nullopt;
            p.list1.push_back(uint32_t(s.constant_value()));
          } else {
            ++symbolic;
            p.list1.push_back(0);
          }
        }
        if (symbolic > 1) return std::nullopt;
        return unary(K::XNNStaticReshape);
      }
      case OpId::SliceCopyTensorOut: {
        auto x = tensor(a[0]);
        auto dim = const_int(a[1]);
        if (!x || !dim || const_int(a[4]) != std::optional<int64_t>(1)) return std::nullopt;
        const auto& xt = g_.type(*x);
        int r = xt.rank();
        int64_t d = *dim < 0 ? *dim + r : *dim;
        if (d < 0 || d >= r || !xt.sizes[size_t(d)].is_constant()) return std::nullopt;
        int64_t size = xt.sizes[size_t(d)].constant_value();
        auto start = std::holds_alternative<graph::None>(a[2]) ? std::optional<int64_t>(0) : const_int(a[2]);
        auto end = std::holds_alternative<graph::None>(a[3]) ? std::optional<int64_t>(size) : const_int(a[3]);
        if (!start || !end) return std::nullopt;
        int64_t s = *start < 0 ? *start + size : *start, e = *end < 0 ? *end + size : *end;
        s = std::clamp<int64_t>(s, 0, size);
        e = std::clamp<int64_t>(e, s, size);
        if (e <= s) return std::nullopt;
        // v1 API: size 0 at offset 0 means "to the end" (the other, possibly symbolic, dims).
        for (int i = 0; i < r; ++i) {
          p.list1.push_back(i == d ? uint32_t(s) : 0u);
          p.list2.push_back(i == d ? uint32_t(e - s) : 0u);
        }
        return unary(K::XNNStaticSlice);
      }
      case OpId::CatOut: {
        const auto* l = std::get_if<graph::TensorList>(&a[0]);
        auto dim = const_int(a[1]);
        if (!l || !dim || l->size() < 2 || l->size() > 5) return std::nullopt;
        int r = out.rank();
        int64_t d = *dim < 0 ? *dim + r : *dim;
        if (d < 0 || d >= r) return std::nullopt;
        for (auto v : *l) if (g_.type(v).rank() != r) return std::nullopt;
        static constexpr K kCat[] = {K::XNNConcatenate2, K::XNNConcatenate3, K::XNNConcatenate4, K::XNNConcatenate5};
        p.kind = kCat[l->size() - 2];
        p.operands = *l;
        p.axis = uint32_t(d);
        return p;
      }
      default:
        return std::nullopt;
    }
  }

  /// convolution(x, W, b?, stride, padding, dilation, transposed=False, _, groups):
  /// Conv2d over NHWC (upstream's partitioner: not transposed, static
  /// weights; depthwise convolutions are not claimed). The filter is written
  /// [Cout, KH, KW, Cin/groups].
  std::optional<Plan> claim_conv(const Node& n) const {
    const auto& a = n.args;
    auto x = tensor(a[0]), w = tensor(a[1]);
    if (!x || !w || is_const(*x) || !is_const(*w)) return std::nullopt;
    const auto& xt = g_.type(*x);
    const auto& wt = g_.type(*w);
    if (xt.rank() != 4 || wt.rank() != 4 || !xt.sizes[1].is_constant()) return std::nullopt;
    for (const auto& d : wt.sizes) if (!d.is_constant()) return std::nullopt;
    const auto* transposed = std::get_if<bool>(&a[6]);
    auto groups = const_int(a[8]);
    auto stride = pair_arg(a[3], 1, 1), padding = pair_arg(a[4], 0, 0), dilation = pair_arg(a[5], 1, 1);
    if (!transposed || *transposed || !groups || *groups < 1 || !stride || !padding || !dilation) return std::nullopt;
    const int64_t cout = wt.sizes[0].constant_value(), cin_g = wt.sizes[1].constant_value();
    if (xt.sizes[1].constant_value() != cin_g * *groups || cout % *groups != 0 || (*groups > 1 && cin_g == 1)) {
      return std::nullopt;
    }
    Plan p;
    p.kind = K::XNNConv2d;
    p.operands = {*x, *w};
    if (!std::holds_alternative<graph::None>(a[2])) {
      auto b = tensor(a[2]);
      if (!b || !is_const(*b) || g_.type(*b).rank() != 1) return std::nullopt;
      p.operands.push_back(*b);
    }
    p.fc_constants = true;
    p.layout = Layout::kChannelsLast;
    XnnWindowSpec& win = p.window;
    win.padding_top = win.padding_bottom = padding->first;
    win.padding_left = win.padding_right = padding->second;
    win.kernel_height = uint32_t(wt.sizes[2].constant_value());
    win.kernel_width = uint32_t(wt.sizes[3].constant_value());
    std::tie(win.stride_height, win.stride_width) = *stride;
    std::tie(win.dilation_height, win.dilation_width) = *dilation;
    win.groups = uint32_t(*groups);
    win.group_input_channels = uint32_t(cin_g);
    win.group_output_channels = uint32_t(cout / *groups);
    return p;
  }

  /// max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode=False):
  /// MaxPooling2d over NHWC (flag KEEP_DIMS, as upstream writes it).
  std::optional<Plan> claim_max_pool(const Node& n) const {
    const auto& a = n.args;
    auto x = tensor(a[0]);
    if (!x || g_.type(*x).rank() != 4 || !g_.type(*x).sizes[1].is_constant()) return std::nullopt;
    auto kernel = pair_arg(a[1], 1, 1), padding = pair_arg(a[3], 0, 0), dilation = pair_arg(a[4], 1, 1);
    const auto* ceil_mode = std::get_if<bool>(&a[5]);
    const auto* stride_list = std::get_if<IntList>(&a[2]);
    if (!kernel || !padding || !dilation || !ceil_mode || *ceil_mode || !stride_list) return std::nullopt;
    auto stride = stride_list->empty() ? kernel : pair_arg(a[2], 1, 1);
    if (!stride) return std::nullopt;
    Plan p;
    p.kind = K::XNNMaxPooling2d;
    p.operands = {*x};
    p.layout = Layout::kChannelsLast;
    p.flags = kKeepDims;
    XnnWindowSpec& win = p.window;
    win.padding_top = win.padding_bottom = padding->first;
    win.padding_left = win.padding_right = padding->second;
    std::tie(win.kernel_height, win.kernel_width) = *kernel;
    std::tie(win.stride_height, win.stride_width) = *stride;
    std::tie(win.dilation_height, win.dilation_width) = *dilation;
    return p;
  }

  const Graph& g_;
  const PartitionOptions& o_;
  const std::unordered_map<ValueId, int>& uses_;
};

std::vector<uint32_t> dims_of(const Graph& g, ValueId v) {
  std::vector<uint32_t> d;
  for (auto b : g.type(v).upper_bounds(g.dims())) d.push_back(uint32_t(b));
  return d;
}

const char* kind_name(K k) { return fb_xnnpack::EnumNameXNodeUnion(k); }

/// `c` in element type `t` (fp32 or fp16; rounded to nearest even on the way
/// down): converted while streaming from the checkpoint where it streams from
/// one, else recoded by the kernel tables' conversion rows (exact, the same
/// bytes on every ISA).
graph::ConstantData as_dtype(const graph::ConstantData& c, ScalarType t) {
  if (c.dtype == t) return c;
  if (c.converted) return c.converted(t);
  const bool widen = c.dtype == ScalarType::kHalf;
  return graph::recoded(c, t, c.sizes, widen ? "|f32" : "|f16", widen ? 2 : 4,
                 [widen](const uint8_t* src, size_t count, std::vector<uint8_t>& dst) {
                   dst.resize(count * (widen ? 4 : 2));
                   if (widen) {
                     kernels::simd().half_to_float_row(reinterpret_cast<const uint16_t*>(src),
                                                       reinterpret_cast<float*>(dst.data()), int64_t(count));
                   } else {
                     kernels::simd().float_to_half_row(reinterpret_cast<const float*>(src),
                                                       reinterpret_cast<uint16_t*>(dst.data()), int64_t(count));
                   }
                 });
}

/// `c` (int8 [n, k], k even) packed two per byte in XNNPACK's order:
/// value + 8, the even column in the low nibble (quant::pack_int4_xnnpack).
graph::ConstantData packed_int4(const graph::ConstantData& c) {
  return graph::recoded(c, ScalarType::kByte, {c.sizes[0], c.sizes[1] / 2}, "|xnn4", 2,
                 [](const uint8_t* in, size_t pairs, std::vector<uint8_t>& out) {
                   out.resize(pairs);
                   quant::pack_int4_xnnpack(std::span<const int8_t>(reinterpret_cast<const int8_t*>(in), 2 * pairs),
                                            out.data());
                 });
}

/// fp32 scales rounded to bf16 (to nearest even), as upstream's XNNPACK
/// writer stores per-block scales.
graph::ConstantData bf16_scales(const graph::ConstantData& c) {
  return graph::recoded(c, ScalarType::kBFloat16, c.sizes, "|bf16", 4,
                 [](const uint8_t* in, size_t count, std::vector<uint8_t>& out) {
                   out.resize(2 * count);
                   for (size_t i = 0; i < count; ++i) {
                     float f;
                     std::memcpy(&f, in + 4 * i, 4);
                     const uint16_t h = float_to_bf16(f);
                     std::memcpy(out.data() + 2 * i, &h, 2);
                   }
                 });
}

/// A conv weight [Cout, Cin_g, KH, KW] written channels-last, [Cout, KH, KW,
/// Cin_g] (XNNPACK's Conv2d filter), one output channel at a time as it streams.
graph::ConstantData nhwc_filter(const graph::ConstantData& c) {
  const int64_t cin = c.sizes[1], kh = c.sizes[2], kw = c.sizes[3];
  return graph::recoded(c, ScalarType::kFloat, {c.sizes[0], kh, kw, cin}, "|nhwc", size_t(cin * kh * kw) * sizeof(float),
                 [cin, kh, kw](const uint8_t* in, size_t units, std::vector<uint8_t>& out) {
                   const size_t unit = size_t(cin * kh * kw);
                   out.resize(units * unit * sizeof(float));
                   const auto* src = reinterpret_cast<const float*>(in);
                   std::vector<float> row(unit);
                   for (size_t u = 0; u < units; ++u) {
                     for (int64_t ch = 0; ch < cin; ++ch) {
                       for (int64_t t = 0; t < kh * kw; ++t) row[size_t(t * cin + ch)] = src[u * unit + size_t(ch * kh * kw + t)];
                     }
                     std::memcpy(out.data() + u * unit * sizeof(float), row.data(), unit * sizeof(float));
                   }
                 });
}

/// [N, C, H, W] bounds as XNNPACK's channels-last dims [N, H, W, C].
std::vector<uint32_t> nhwc_dims(const Graph& g, ValueId v) {
  const auto d = dims_of(g, v);
  return {d[0], d[2], d[3], d[1]};
}

/// NCHW -> NHWC and back (StaticTranspose perms, output dim i = input dim perm[i]).
const std::vector<uint32_t> kToChannelsLast{0, 2, 3, 1}, kToChannelsFirst{0, 3, 1, 2};

/// Builds the delegate for nodes [begin, end) of `nodes` (all claimed).
Result<graph::Delegate> lower_run(const Graph& g, const std::vector<Node>& nodes, const std::vector<std::optional<Plan>>& plans,
                                  size_t begin, size_t end, const std::vector<ValueId>& inputs,
                                  const std::vector<ValueId>& outputs, const PartitionOptions& options,
                                  PartitionStats& stats) {
  XnnSubgraph s;
  graph::Delegate d;
  d.backend_id = kXnnpackBackendId;
  std::unordered_map<ValueId, uint32_t> ids;
  // A value's datatype is its graph dtype's (fp32 / fp16) unless `dt` says otherwise.
  auto add_value = [&](ValueId v, uint32_t ext, uint32_t flags, uint32_t cidx, bool swap_dims = false,
                       std::optional<fb_xnnpack::XNNDatatype> dt = std::nullopt, XnnQuantSpec q = {}) {
    std::vector<uint32_t> dims = dims_of(g, v);
    if (swap_dims) std::reverse(dims.begin(), dims.end());  // 2-D only
    s.values.push_back({std::move(dims), ext, flags, cidx, dt.value_or(xnn_datatype(g.type(v).dtype)), q});
    ids[v] = uint32_t(s.values.size() - 1);
  };
  for (size_t i = 0; i < inputs.size(); ++i) add_value(inputs[i], uint32_t(i), 1, 0);
  for (size_t i = 0; i < outputs.size(); ++i) add_value(outputs[i], uint32_t(inputs.size() + i), 2, 0);
  s.num_externs = uint32_t(inputs.size() + outputs.size());
  std::map<std::string, uint32_t> const_idx;  // named-data key -> constant_data index
  // Streams `c` once for its SHA-256 key (upstream's naming: the hex digest, or
  // "scale_" + digest for quantization scales) and returns its constant_data index.
  auto add_named = [&](const graph::ConstantData& c, const std::string& what, const char* prefix) -> Result<uint32_t> {
    Sha256 h;
    uint64_t n = 0;
    HF2PTE_RETURN_IF_ERROR(c.write([&](const void* p, size_t size) {
      h.update(p, size);
      n += size;
      return Status::ok();
    }));
    if (n != c.nbytes()) {
      return make_error(ErrorCode::kInternal, "constant %{} streamed {} bytes, expected {}", what, n, c.nbytes());
    }
    std::string key = prefix + h.hex();
    auto [it, fresh] = const_idx.emplace(key, uint32_t(s.constants.size() + 1));
    if (fresh) {
      s.constants.push_back({key, n});
      d.named.push_back({key, c});
    }
    return it->second;
  };
  // `as_transposed`: the constant is written as its [cols, rows] transpose;
  // `dtype`: the element type it is written in (converted while streaming).
  auto named_constant = [&](ValueId v, bool as_transposed, ScalarType dtype) -> Result<uint32_t> {
    if (auto it = ids.find(v); it != ids.end()) return it->second;
    graph::ConstantData c = as_dtype(as_transposed ? g.constant(v).transposed() : g.constant(v), dtype);
    HF2PTE_ASSIGN_OR_RETURN(uint32_t idx, add_named(c, g.value(v).name, ""));
    add_value(v, kXnnInvalidId, 0, idx, as_transposed, xnn_datatype(dtype));
    return ids[v];
  };
  // A quantized filter [n, k] (docs/quantization.md, "How upstream 1.3.x stores
  // them"): int8 bytes as they are (qcint8) or packed two per byte, even column
  // low (qcint4 / qbint4); fp32 per-channel scales, or bf16 per-block scales.
  auto quantized_filter = [&](ValueId w, ValueId scales, const graph::QuantInfo& q) -> Result<uint32_t> {
    if (auto it = ids.find(w); it != ids.end()) return it->second;
    const int64_t n = g.constant(w).sizes[0], k = g.constant(w).sizes[1];
    graph::ConstantData filter = q.bits == 4 ? packed_int4(g.constant(w)) : g.constant(w);
    HF2PTE_ASSIGN_OR_RETURN(uint32_t fidx, add_named(filter, g.value(w).name, ""));
    XnnQuantSpec spec;
    graph::ConstantData sc = g.constant(scales);
    if (q.group == 0) {
      spec.kind = XnnQuantSpec::Kind::kPerChannel;
      spec.num_scales = uint32_t(n);
    } else {
      spec.kind = XnnQuantSpec::Kind::kPerChannelGroup;
      spec.group_size = int32_t(q.group);
      spec.num_scales = uint32_t(n * (k / q.group));
      sc = bf16_scales(sc);
    }
    HF2PTE_ASSIGN_OR_RETURN(spec.scale_buffer_idx, add_named(sc, g.value(scales).name, "scale_"));
    using DT = fb_xnnpack::XNNDatatype;
    const DT dt = q.bits == 8 ? DT::qcint8 : q.group == 0 ? DT::qcint4 : DT::qbint4;
    add_value(w, kXnnInvalidId, 0, fidx, false, dt, spec);
    return ids[w];
  };
  // Channels-last values: graph value -> id of its NHWC copy. `ids` holds the
  // graph-layout (NCHW) ids; each layout is made from the other on first use
  // by a StaticTranspose, as upstream's channels-last pass inserts them.
  std::unordered_map<ValueId, uint32_t> nhwc;
  auto transpose = [&](uint32_t in, std::vector<uint32_t> dims, const std::vector<uint32_t>& perm, uint32_t handle,
                       std::optional<uint32_t> out = std::nullopt) {
    if (!out) {
      s.values.push_back({std::move(dims), kXnnInvalidId, 0, 0, s.values[in].datatype});
      out = uint32_t(s.values.size() - 1);
    }
    XnnNodeSpec t;
    t.kind = K::XNNStaticTranspose;
    t.list1 = perm;
    t.ids = {in, *out};
    t.debug_handle = handle;
    s.nodes.push_back(std::move(t));
    ++stats.xnn_nodes[kind_name(K::XNNStaticTranspose)];
    return *out;
  };
  auto graph_layout_id = [&](ValueId v, uint32_t handle) -> Result<uint32_t> {
    if (auto it = ids.find(v); it != ids.end()) return it->second;
    auto it = nhwc.find(v);
    if (it == nhwc.end()) return make_error(ErrorCode::kInternal, "xnnpack partition: value %{} has no id", g.value(v).name);
    ids[v] = transpose(it->second, dims_of(g, v), kToChannelsFirst, handle);
    return ids[v];
  };
  auto channels_last_id = [&](ValueId v, uint32_t handle) -> Result<uint32_t> {
    if (auto it = nhwc.find(v); it != nhwc.end()) return it->second;
    HF2PTE_ASSIGN_OR_RETURN(uint32_t in, graph_layout_id(v, handle));
    nhwc[v] = transpose(in, nhwc_dims(g, v), kToChannelsLast, handle);
    return nhwc[v];
  };
  // An elementwise node computes channels-last when one of its operands is,
  // and every operand has the output's 4-D shape (no broadcast to remap).
  auto follows_channels_last = [&](const Plan& p, ValueId o) {
    if (g.type(o).rank() != 4) return false;
    bool any = false;
    for (ValueId v : p.operands) {
      if (g.type(v).sizes != g.type(o).sizes) return false;
      any = any || nhwc.count(v) > 0;
    }
    return any;
  };
  for (size_t i = begin; i < end; ++i) {
    const Node& n = nodes[i];
    const Plan& p = *plans[i];
    if (p.folded) continue;
    XnnNodeSpec spec;
    spec.kind = p.kind;
    spec.flags = p.flags;
    spec.list1 = p.list1;
    spec.list2 = p.list2;
    spec.axis = p.axis;
    spec.window = p.window;
    spec.output_min_max = p.output_min_max;
    spec.debug_handle = uint32_t(i);
    const ValueId o = output_of(n, p);
    const bool channels_last =
        p.layout == Layout::kChannelsLast || (p.layout == Layout::kFollow && follows_channels_last(p, o));
    // The node's output id; a channels-last output that leaves the delegate is
    // transposed back into its external value right after the node.
    auto output_id = [&]() -> uint32_t {
      if (!channels_last) {
        if (!ids.count(o)) add_value(o, kXnnInvalidId, 0, 0);
        return ids[o];
      }
      s.values.push_back({nhwc_dims(g, o), kXnnInvalidId, 0, 0, xnn_datatype(g.type(o).dtype)});
      return nhwc[o] = uint32_t(s.values.size() - 1);
    };
    auto emit = [&](XnnNodeSpec&& node) {
      s.nodes.push_back(std::move(node));
      ++stats.xnn_nodes[kind_name(p.kind)];
      if (auto ext = ids.find(o); channels_last && ext != ids.end()) {
        transpose(nhwc[o], {}, kToChannelsFirst, uint32_t(i), ext->second);
      }
    };
    if (p.kind == K::XNNConv2d) {
      // Input channels-last, the filter [Cout, KH, KW, Cin/groups] and bias as
      // named data (fp32 also in an fp16 graph, as upstream writes conv
      // constants), output channels-last.
      HF2PTE_ASSIGN_OR_RETURN(uint32_t in, channels_last_id(p.operands[0], uint32_t(i)));
      const ValueId w = p.operands[1];
      HF2PTE_ASSIGN_OR_RETURN(uint32_t fidx, add_named(nhwc_filter(as_dtype(g.constant(w), ScalarType::kFloat)),
                                                      g.value(w).name, ""));
      const auto wd = dims_of(g, w);
      s.values.push_back({{wd[0], wd[2], wd[3], wd[1]}, kXnnInvalidId, 0, fidx});
      const uint32_t wid = uint32_t(s.values.size() - 1);
      uint32_t bid = kXnnInvalidId;
      if (p.operands.size() > 2) {
        HF2PTE_ASSIGN_OR_RETURN(bid, named_constant(p.operands[2], false, ScalarType::kFloat));
      }
      spec.ids = {in, wid, bid, output_id()};
      emit(std::move(spec));
      continue;
    }
    // FullyConnected constants are written in the node's datatype (an fp16
    // graph's filter and bias are fp16, as upstream writes them), except that
    // an fp32 node takes fp16 filters (options.fc_filter_dtype) where the
    // checkpoint streams them (converted on the way out); fp32 biases.
    const ScalarType node_dtype = g.type(o).dtype;
    const bool filter_fp16 = p.kind == K::XNNFullyConnected && options.fc_filter_dtype == ScalarType::kHalf &&
                             static_cast<bool>(g.constant(p.operands[1]).converted);
    const ScalarType filter_dtype = filter_fp16 ? ScalarType::kHalf : node_dtype;
    // A filter W^T that streams from the checkpoint's W is written as W, [n, k]
    // with flag 0 (XNNPACK's default layout, as upstream writes it): decode's
    // GEMV then reads each output's weights as one sequential row, in place.
    // Long-input fp16 filters of an fp32 node stay [k, n] with the flag.
    const bool filter_as_nk = p.kind == K::XNNFullyConnected && p.flags == kFcTransposeFilter &&
                              static_cast<bool>(g.constant(p.operands[1]).transposed) &&
                              !k_major_filter(filter_dtype, node_dtype, g.constant(p.operands[1]).sizes);
    if (filter_as_nk) spec.flags = 0;
    if (p.filter_quant) {
      // Quantized FullyConnected: input (through a qdint8 Convert when the
      // activations are quantized per token), the quantized filter, no bias.
      HF2PTE_ASSIGN_OR_RETURN(uint32_t in, graph_layout_id(p.operands[0], uint32_t(i)));
      if (p.dynamic_input) {
        XnnQuantSpec qd;
        qd.kind = XnnQuantSpec::Kind::kPerTokenDynamic;
        qd.num_nonbatch_dims = 1;
        s.values.push_back({dims_of(g, p.operands[0]), kXnnInvalidId, 0, 0, fb_xnnpack::XNNDatatype::qdint8, qd});
        const uint32_t qid = uint32_t(s.values.size() - 1);
        XnnNodeSpec convert;
        convert.kind = K::XNNConvert;
        convert.ids = {in, qid};
        convert.debug_handle = uint32_t(i);
        s.nodes.push_back(std::move(convert));
        ++stats.xnn_nodes[kind_name(K::XNNConvert)];
        in = qid;
      }
      HF2PTE_ASSIGN_OR_RETURN(uint32_t wid, quantized_filter(p.operands[1], p.filter_scales, *p.filter_quant));
      spec.flags = 0;  // [n, k], as the checkpoint stores it
      spec.ids = {in, wid, kXnnInvalidId, output_id()};
      emit(std::move(spec));
      continue;
    }
    for (size_t k = 0; k < p.operands.size(); ++k) {
      ValueId v = p.operands[k];
      if (p.fc_constants && k >= 1) {
        HF2PTE_ASSIGN_OR_RETURN(uint32_t id, named_constant(v, k == 1 && filter_as_nk, k == 1 ? filter_dtype : node_dtype));
        spec.ids.push_back(id);
        continue;
      }
      HF2PTE_ASSIGN_OR_RETURN(uint32_t id, channels_last ? channels_last_id(v, uint32_t(i)) : graph_layout_id(v, uint32_t(i)));
      spec.ids.push_back(id);
    }
    if (p.kind == K::XNNFullyConnected && p.operands.size() == 2) spec.ids.push_back(kXnnInvalidId);  // no bias
    spec.ids.push_back(output_id());
    emit(std::move(spec));
  }
  d.payload = serialize_xnn_payload(s);
  std::map<std::string, int> counts;
  for (const auto& n : s.nodes) ++counts[kind_name(n.kind)];
  for (const auto& [k, c] : counts) d.summary += fmt::format("{}{} x{}", d.summary.empty() ? "" : ", ", k, c);
  return d;
}

}  // namespace

Result<PartitionStats> partition_for_xnnpack(Graph& g, const PartitionOptions& options) {
  PartitionStats stats;
  std::vector<Node> nodes = g.nodes();
  // Last use of every value (graph outputs count as used after every node).
  std::unordered_map<ValueId, size_t> last_use;
  for (size_t i = 0; i < nodes.size(); ++i) graph::for_each_tensor_arg(nodes[i], [&](ValueId v) { last_use[v] = i; });
  for (auto v : g.outputs()) last_use[v] = nodes.size();
  std::unordered_map<ValueId, int> uses;
  for (const auto& n : nodes) graph::for_each_tensor_arg(n, [&](ValueId v) { ++uses[v]; });
  for (auto v : g.outputs()) ++uses[v];
  Claimer claimer(g, options, uses);
  std::vector<std::optional<Plan>> plans(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) plans[i] = claimer.claim(nodes[i]);
  fold_transposes_into_bmm(nodes, plans, uses, last_use);
  fold_dynamic_quant_into_fc(g, nodes, plans, uses, last_use);
  fold_erf_gelu(g, nodes, plans, uses);
  fuse_clamps(nodes, plans, uses);

  std::vector<Node> rewritten;
  for (size_t i = 0; i < nodes.size();) {
    if (!plans[i]) {
      rewritten.push_back(std::move(nodes[i]));
      ++i;
      continue;
    }
    // A maximal run of claimed nodes: contiguous in node order, so it cannot
    // form a cycle with the nodes left outside.
    size_t end = i;
    while (end < nodes.size() && plans[end]) ++end;
    std::unordered_set<ValueId> produced;
    std::vector<ValueId> inputs, outputs;
    std::unordered_set<ValueId> seen;
    for (size_t k = i; k < end; ++k) {
      const Plan& p = *plans[k];
      if (p.folded) continue;
      for (size_t j = 0; j < p.operands.size(); ++j) {
        ValueId v = p.operands[j];
        if (p.fc_constants && j >= 1) continue;  // named constants, not args
        if (!produced.count(v) && seen.insert(v).second) inputs.push_back(v);
      }
      produced.insert(output_of(nodes[k], p));
    }
    for (size_t k = i; k < end; ++k) {
      if (plans[k]->folded) continue;
      ValueId o = output_of(nodes[k], *plans[k]);
      auto it = last_use.find(o);
      if (it != last_use.end() && it->second >= end) outputs.push_back(o);
    }
    if (outputs.empty()) {  // dead run: keep it as kernels (nothing to bind)
      for (size_t k = i; k < end; ++k) if (!plans[k]->folded) rewritten.push_back(std::move(nodes[k]));
      i = end;
      continue;
    }
    HF2PTE_ASSIGN_OR_RETURN(graph::Delegate d, lower_run(g, nodes, plans, i, end, inputs, outputs, options, stats));
    rewritten.push_back(graph::delegate_call(g, std::move(d), fmt::format("xnnpack.{}", stats.partitions), inputs, outputs));
    stats.claimed_nodes += int(end - i);
    ++stats.partitions;
    i = end;
  }
  g.mutable_nodes() = std::move(rewritten);
  return stats;
}

}  // namespace hf2pte::xnn
