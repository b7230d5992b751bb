#include "backends/xnnpack/export/partition.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "backends/xnnpack/export/serialize.h"
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
};

/// XNN_FLAG_TRANSPOSE_WEIGHTS of xnn_define_fully_connected: the filter is [k, n].
constexpr uint32_t kFcTransposeFilter = 0x1;
/// XNN_FLAG_TRANSPOSE_B of xnn_define_batch_matrix_multiply (upstream passes the node's flags).
constexpr uint32_t kBmmTransposeB = 0x1;

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

class Claimer {
 public:
  Claimer(const Graph& g, const PartitionOptions& o) : g_(g), o_(o) {}

  /// fp32, contiguous, every dim bounded, rank <= 6.
  bool plain(ValueId v) const {
    const auto& val = g_.value(v);
    if (val.role == graph::ValueRole::kSymInt) return false;
    const auto& t = val.type;
    if (t.dtype != ScalarType::kFloat || t.rank() > kMaxRank) return false;
    for (size_t i = 0; i < t.dim_order.size(); ++i) if (t.dim_order[i] != i) return false;
    for (auto b : t.upper_bounds(g_.dims())) if (b <= 0 || b == graph::DimRange::kUnbounded || b > INT32_MAX) return false;
    return true;
  }
  bool is_const(ValueId v) const { return g_.value(v).role == graph::ValueRole::kConstant; }

  std::optional<Plan> claim(const Node& n) const {
    if (n.outputs.size() != 1 || !plain(n.outputs[0])) return std::nullopt;
    auto p = claim_op(n);
    if (!p) return std::nullopt;
    for (size_t k = 0; k < p->operands.size(); ++k) {
      if (p->filter_quant && k >= 1) continue;  // the quantized filter: int8 bytes by design
      if (!plain(p->operands[k])) return std::nullopt;
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
    switch (n.op) {
      case OpId::AddOut: return is_one(a[2]) ? binary(K::XNNAdd) : std::nullopt;
      case OpId::SubOut: return is_one(a[2]) ? binary(K::XNNSubtract) : std::nullopt;
      case OpId::MulOut: return binary(K::XNNMultiply);
      case OpId::DivOut: return binary(K::XNNDiv);
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

  const Graph& g_;
  const PartitionOptions& o_;
};

std::vector<uint32_t> dims_of(const Graph& g, ValueId v) {
  std::vector<uint32_t> d;
  for (auto b : g.type(v).upper_bounds(g.dims())) d.push_back(uint32_t(b));
  return d;
}

const char* kind_name(K k) { return fb_xnnpack::EnumNameXNodeUnion(k); }

/// `c` re-encoded while it streams: every whole `unit` bytes of input go
/// through `encode` (the bytes of a chunk boundary wait for the next chunk).
graph::ConstantData recoded(const graph::ConstantData& c, ScalarType dtype, std::vector<int64_t> sizes,
                            const char* key_suffix, size_t unit,
                            std::function<void(const uint8_t* in, size_t units, std::vector<uint8_t>& out)> encode) {
  graph::ConstantData p = c;
  p.dtype = dtype;
  p.sizes = std::move(sizes);
  p.dedup_key = c.dedup_key.empty() ? "" : c.dedup_key + key_suffix;
  p.write = [c, unit, encode](const graph::ConstantData::Sink& sink) -> Status {
    std::vector<uint8_t> pending, out;
    return c.write([&](const void* data, size_t size) -> Status {
      const auto* b = static_cast<const uint8_t*>(data);
      pending.insert(pending.end(), b, b + size);
      const size_t units = pending.size() / unit;
      out.clear();
      encode(pending.data(), units, out);
      pending.erase(pending.begin(), pending.begin() + std::ptrdiff_t(units * unit));
      return out.empty() ? Status::ok() : sink(out.data(), out.size());
    });
  };
  return p;
}

/// `c` (int8 [n, k], k even) packed two per byte in XNNPACK's order:
/// value + 8, the even column in the low nibble (quant::pack_int4_xnnpack).
graph::ConstantData packed_int4(const graph::ConstantData& c) {
  return recoded(c, ScalarType::kByte, {c.sizes[0], c.sizes[1] / 2}, "|xnn4", 2,
                 [](const uint8_t* in, size_t pairs, std::vector<uint8_t>& out) {
                   out.resize(pairs);
                   quant::pack_int4_xnnpack(std::span<const int8_t>(reinterpret_cast<const int8_t*>(in), 2 * pairs),
                                            out.data());
                 });
}

/// fp32 scales rounded to bf16 (to nearest even), as upstream's XNNPACK
/// writer stores per-block scales.
graph::ConstantData bf16_scales(const graph::ConstantData& c) {
  return recoded(c, ScalarType::kBFloat16, c.sizes, "|bf16", 4,
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

/// Builds the delegate for nodes [begin, end) of `nodes` (all claimed).
Result<graph::Delegate> lower_run(const Graph& g, const std::vector<Node>& nodes, const std::vector<std::optional<Plan>>& plans,
                                  size_t begin, size_t end, const std::vector<ValueId>& inputs,
                                  const std::vector<ValueId>& outputs, const PartitionOptions& options,
                                  PartitionStats& stats) {
  XnnSubgraph s;
  graph::Delegate d;
  d.backend_id = kXnnpackBackendId;
  std::unordered_map<ValueId, uint32_t> ids;
  auto add_value = [&](ValueId v, uint32_t ext, uint32_t flags, uint32_t cidx, bool swap_dims = false,
                       fb_xnnpack::XNNDatatype dt = fb_xnnpack::XNNDatatype::fp32, XnnQuantSpec q = {}) {
    std::vector<uint32_t> dims = dims_of(g, v);
    if (swap_dims) std::reverse(dims.begin(), dims.end());  // 2-D only
    s.values.push_back({std::move(dims), ext, flags, cidx, dt, q});
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
  // `as_fp16`: converted to fp16 while streaming.
  auto named_constant = [&](ValueId v, bool as_transposed, bool as_fp16) -> Result<uint32_t> {
    if (auto it = ids.find(v); it != ids.end()) return it->second;
    graph::ConstantData c = as_transposed ? g.constant(v).transposed() : g.constant(v);
    if (as_fp16) c = c.converted(ScalarType::kHalf);
    HF2PTE_ASSIGN_OR_RETURN(uint32_t idx, add_named(c, g.value(v).name, ""));
    add_value(v, kXnnInvalidId, 0, idx, as_transposed, as_fp16 ? fb_xnnpack::XNNDatatype::fp16 : fb_xnnpack::XNNDatatype::fp32);
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
    spec.debug_handle = uint32_t(i);
    // A filter W^T that streams from the checkpoint's W is written as W, [n, k]
    // with flag 0 (XNNPACK's default layout, as upstream writes it): decode's
    // GEMV then reads each output's weights as one sequential row, in place.
    const bool filter_as_nk = p.kind == K::XNNFullyConnected && p.flags == kFcTransposeFilter &&
                              static_cast<bool>(g.constant(p.operands[1]).transposed);
    if (filter_as_nk) spec.flags = 0;
    // fp16 filters only where the checkpoint streams them (converted on the way out).
    const bool filter_fp16 = p.kind == K::XNNFullyConnected && options.fc_filter_dtype == ScalarType::kHalf &&
                             static_cast<bool>(g.constant(p.operands[1]).converted);
    if (p.filter_quant) {
      // Quantized FullyConnected: input (through a qdint8 Convert when the
      // activations are quantized per token), the quantized filter, no bias.
      auto it = ids.find(p.operands[0]);
      if (it == ids.end()) return make_error(ErrorCode::kInternal, "xnnpack partition: input of {} has no id", n.name);
      uint32_t in = it->second;
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
      spec.ids = {in, wid, kXnnInvalidId};
      ValueId o = n.outputs[0];
      if (!ids.count(o)) add_value(o, kXnnInvalidId, 0, 0);
      spec.ids.push_back(ids[o]);
      s.nodes.push_back(std::move(spec));
      ++stats.xnn_nodes[kind_name(p.kind)];
      continue;
    }
    for (size_t k = 0; k < p.operands.size(); ++k) {
      ValueId v = p.operands[k];
      if (p.fc_constants && k >= 1) {
        HF2PTE_ASSIGN_OR_RETURN(uint32_t id, named_constant(v, k == 1 && filter_as_nk, k == 1 && filter_fp16));
        spec.ids.push_back(id);
        continue;
      }
      auto it = ids.find(v);
      if (it == ids.end()) return make_error(ErrorCode::kInternal, "xnnpack partition: operand %{} of {} has no id", g.value(v).name, n.name);
      spec.ids.push_back(it->second);
    }
    if (p.kind == K::XNNFullyConnected && p.operands.size() == 2) spec.ids.push_back(kXnnInvalidId);  // no bias
    ValueId o = n.outputs[0];
    if (!ids.count(o)) add_value(o, kXnnInvalidId, 0, 0);
    spec.ids.push_back(ids[o]);
    s.nodes.push_back(std::move(spec));
    ++stats.xnn_nodes[kind_name(p.kind)];
  }
  d.payload = serialize_xnn_payload(s);
  std::map<std::string, int> counts;
  for (const auto& n : s.nodes) ++counts[kind_name(n.kind)];
  for (const auto& [k, c] : counts) d.summary += fmt::format("{}{} x{}", d.summary.empty() ? "" : ", ", k, c);
  return d;
}

void for_each_tensor_arg(const Node& n, const std::function<void(ValueId)>& f) {
  for (const auto& a : n.args) {
    if (const auto* id = std::get_if<ValueId>(&a)) f(*id);
    if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) f(v);
    if (const auto* l = std::get_if<graph::OptTensorList>(&a)) for (const auto& v : *l) if (v) f(*v);
  }
}

}  // namespace

Result<PartitionStats> partition_for_xnnpack(Graph& g, const PartitionOptions& options) {
  PartitionStats stats;
  Claimer claimer(g, options);
  std::vector<Node> nodes = g.nodes();
  std::vector<std::optional<Plan>> plans(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) plans[i] = claimer.claim(nodes[i]);
  // Last use of every value (graph outputs count as used after every node).
  std::unordered_map<ValueId, size_t> last_use;
  for (size_t i = 0; i < nodes.size(); ++i) for_each_tensor_arg(nodes[i], [&](ValueId v) { last_use[v] = i; });
  for (auto v : g.outputs()) last_use[v] = nodes.size();
  std::unordered_map<ValueId, int> uses;
  for (const auto& n : nodes) for_each_tensor_arg(n, [&](ValueId v) { ++uses[v]; });
  for (auto v : g.outputs()) ++uses[v];
  fold_transposes_into_bmm(nodes, plans, uses, last_use);
  fold_dynamic_quant_into_fc(g, nodes, plans, uses, last_use);

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
      produced.insert(nodes[k].outputs[0]);
    }
    for (size_t k = i; k < end; ++k) {
      if (plans[k]->folded) continue;
      ValueId o = nodes[k].outputs[0];
      auto it = last_use.find(o);
      if (it != last_use.end() && it->second >= end) outputs.push_back(o);
    }
    if (outputs.empty()) {  // dead run: keep it as kernels (nothing to bind)
      for (size_t k = i; k < end; ++k) if (!plans[k]->folded) rewritten.push_back(std::move(nodes[k]));
      i = end;
      continue;
    }
    HF2PTE_ASSIGN_OR_RETURN(graph::Delegate d, lower_run(g, nodes, plans, i, end, inputs, outputs, options, stats));
    Node call;
    call.op = OpId::DelegateCall;
    call.name = fmt::format("xnnpack.{}", stats.partitions);
    int32_t idx = g.add_delegate(std::move(d));
    call.args = {int64_t(idx), graph::TensorList(inputs)};
    call.outputs = outputs;
    rewritten.push_back(std::move(call));
    stats.claimed_nodes += int(end - i);
    ++stats.partitions;
    i = end;
  }
  g.mutable_nodes() = std::move(rewritten);
  return stats;
}

}  // namespace hf2pte::xnn
