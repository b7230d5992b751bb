#include "backends/cuda/export/partition.h"

#include <fmt/format.h>
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "backends/cuda/cuda_payload_generated.h"
#include "backends/cuda/schema/op_set.h"
#include "graph/delegate_call.h"

namespace hf2pte::cuda {
namespace {

using graph::Arg;
using graph::Graph;
using graph::Node;
using graph::SymInt;
using graph::ValueId;
using graph::ValueRole;

constexpr uint32_t kPayloadVersion = 1;
constexpr uint64_t kArenaAlignment = 64;

bool supported_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat: case ScalarType::kBFloat16: case ScalarType::kHalf: case ScalarType::kLong:
    case ScalarType::kInt: case ScalarType::kBool:
    case ScalarType::kChar: case ScalarType::kByte: case ScalarType::kDouble:  // quantized ops
      return true;
    default:
      return false;
  }
}

bool has_unbacked(const SymInt& s) {
  switch (s.kind()) {
    case SymInt::Kind::kUnbacked: return true;
    case SymInt::Kind::kConst: case SymInt::Kind::kDim: return false;
    default: return has_unbacked(s.lhs()) || has_unbacked(s.rhs());
  }
}

/// A node the delegate can hold: an op of the set, tensors of supported
/// dtypes whose sizes are known from the inputs (no data-dependent sizes).
bool claimable(const Graph& g, const Node& n) {
  if (!cuda_supports(n.op)) return false;
  bool ok = true;
  auto check_tensor = [&](ValueId v) {
    const auto& val = g.value(v);
    if (val.role == ValueRole::kSymInt || !supported_dtype(val.type.dtype)) ok = false;
    // Contiguous tensors only: the device kernels index row-major memory.
    for (size_t d = 0; d < val.type.dim_order.size(); ++d) ok = ok && val.type.dim_order[d] == d;
    for (const auto& s : val.type.sizes) ok = ok && !has_unbacked(s);
  };
  graph::for_each_tensor_arg(n, check_tensor);
  for (auto v : n.outputs) check_tensor(v);
  for (const auto& a : n.args) {
    if (const auto* s = std::get_if<SymInt>(&a)) ok = ok && !has_unbacked(*s);
    if (const auto* l = std::get_if<graph::IntList>(&a)) for (const auto& s : *l) ok = ok && !has_unbacked(s);
  }
  return ok;
}

struct TensorSpec {
  ScalarType dtype = ScalarType::kFloat;
  std::vector<uint32_t> sizes;
  std::vector<int64_t> max_sizes;
  fb_cuda::TensorRole role = fb_cuda::TensorRole::Intermediate;
  uint32_t io_index = 0;
  std::string key;
  uint64_t offset = 0;
};

struct ValueSpec {
  fb_cuda::ValueKind kind = fb_cuda::ValueKind::None;
  uint32_t tensor = 0;
  std::vector<uint32_t> exprs;
  double f = 0;
  bool b = false;
  std::vector<int32_t> tensors;
  ScalarType scalar_type = ScalarType::kFloat;
};

struct NodeSpec {
  std::string op, name;
  std::vector<uint32_t> args;
};

/// One run of nodes [begin, end) lowered to a payload.
class RunLowering {
 public:
  RunLowering(const Graph& g, const std::vector<Node>& nodes, size_t begin, size_t end)
      : g_(g), nodes_(nodes), begin_(begin), end_(end) {}

  /// May append method inputs to `inputs`: a dim no run input has as a size
  /// is read from the method input that defines it.
  Result<graph::Delegate> lower(std::vector<ValueId>& inputs, const std::vector<ValueId>& outputs,
                                const std::unordered_set<ValueId>& used_outside) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& v = g_.value(inputs[i]);
      auto role = v.role == ValueRole::kBuffer && !used_outside.count(inputs[i]) ? fb_cuda::TensorRole::State
                                                                                  : fb_cuda::TensorRole::Input;
      HF2PTE_RETURN_IF_ERROR(add_tensor(inputs[i], role, uint32_t(i)).status());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      HF2PTE_RETURN_IF_ERROR(add_tensor(outputs[i], fb_cuda::TensorRole::Output, uint32_t(i)).status());
    }
    for (size_t k = begin_; k < end_; ++k) HF2PTE_RETURN_IF_ERROR(add_node(nodes_[k]));
    HF2PTE_RETURN_IF_ERROR(resolve_dims(inputs));
    plan_arena();
    graph::Delegate d;
    d.backend_id = kCudaBackendId;
    d.payload = serialize(uint32_t(inputs.size()), uint32_t(outputs.size()));
    d.named = std::move(named_);
    d.summary = fmt::format("{} nodes, {} tensors, arena {} bytes", nodes_out_.size(), tensors_.size(), arena_bytes_);
    return d;
  }

  uint64_t arena_bytes() const { return arena_bytes_; }

 private:
  Result<uint32_t> expr(const SymInt& s) {
    auto it = expr_ids_.find(s);
    if (it != expr_ids_.end()) return it->second;
    fb_cuda::Expr e;
    using K = SymInt::Kind;
    switch (s.kind()) {
      case K::kConst: e = fb_cuda::Expr(fb_cuda::ExprKind::Const, 0, 0, s.constant_value()); break;
      case K::kDim: {
        auto [d, inserted] = dim_ids_.emplace(s.dim_name(), uint32_t(dim_names_.size()));
        if (inserted) dim_names_.push_back(s.dim_name());
        e = fb_cuda::Expr(fb_cuda::ExprKind::Dim, 0, 0, int64_t(d->second));
        break;
      }
      case K::kUnbacked:
        return make_error(ErrorCode::kInternal, "data-dependent size '{}' reached the CUDA payload", s.str());
      default: {
        static const std::unordered_map<int, fb_cuda::ExprKind> kBinary = {
            {int(K::kAdd), fb_cuda::ExprKind::Add}, {int(K::kSub), fb_cuda::ExprKind::Sub},
            {int(K::kMul), fb_cuda::ExprKind::Mul}, {int(K::kFloorDiv), fb_cuda::ExprKind::FloorDiv},
            {int(K::kMod), fb_cuda::ExprKind::Mod}, {int(K::kMin), fb_cuda::ExprKind::Min},
            {int(K::kMax), fb_cuda::ExprKind::Max}};
        HF2PTE_ASSIGN_OR_RETURN(uint32_t l, expr(s.lhs()));
        HF2PTE_ASSIGN_OR_RETURN(uint32_t r, expr(s.rhs()));
        e = fb_cuda::Expr(kBinary.at(int(s.kind())), int32_t(l), int32_t(r), 0);
      }
    }
    exprs_.push_back(e);
    expr_ids_.emplace(s, uint32_t(exprs_.size() - 1));
    return uint32_t(exprs_.size() - 1);
  }

  /// The tensor (and its Value) for graph value `v`, made on first use.
  Result<uint32_t> add_tensor(ValueId v, fb_cuda::TensorRole role, uint32_t io_index = 0) {
    auto it = value_of_tensor_.find(v);
    if (it != value_of_tensor_.end()) return it->second;
    const auto& val = g_.value(v);
    TensorSpec t;
    t.dtype = val.type.dtype;
    for (const auto& s : val.type.sizes) {
      HF2PTE_ASSIGN_OR_RETURN(uint32_t e, expr(s));
      t.sizes.push_back(e);
    }
    t.max_sizes = val.type.planning_bounds(g_.dims());
    if (val.role == ValueRole::kConstant) {
      role = fb_cuda::TensorRole::Constant;
      // Deterministic and unique within the program (the same constant used
      // twice, e.g. tied embeddings, is one entry).
      t.key = fmt::format("cuda/{}/{}", g_.name(), val.constant_idx);
      named_.push_back({t.key, g_.constant(v)});
    }
    t.role = role;
    t.io_index = io_index;
    tensors_.push_back(std::move(t));
    tensor_of_value_.push_back(v);
    ValueSpec spec;
    spec.kind = fb_cuda::ValueKind::Tensor;
    spec.tensor = uint32_t(tensors_.size() - 1);
    values_.push_back(std::move(spec));
    value_of_tensor_.emplace(v, uint32_t(values_.size() - 1));
    return uint32_t(values_.size() - 1);
  }

  uint32_t add_value(ValueSpec v) {
    values_.push_back(std::move(v));
    return uint32_t(values_.size() - 1);
  }

  Result<uint32_t> add_arg(const Arg& a) {
    ValueSpec v;
    if (std::holds_alternative<graph::None>(a)) return add_value(v);
    if (const auto* id = std::get_if<ValueId>(&a)) return add_tensor(*id, fb_cuda::TensorRole::Intermediate);
    if (const auto* i = std::get_if<int64_t>(&a)) {
      v.kind = fb_cuda::ValueKind::Int;
      HF2PTE_ASSIGN_OR_RETURN(uint32_t e, expr(SymInt(*i)));
      v.exprs = {e};
    } else if (const auto* s = std::get_if<SymInt>(&a)) {
      v.kind = fb_cuda::ValueKind::Int;
      HF2PTE_ASSIGN_OR_RETURN(uint32_t e, expr(*s));
      v.exprs = {e};
    } else if (const auto* d = std::get_if<double>(&a)) {
      v.kind = fb_cuda::ValueKind::Double;
      v.f = *d;
    } else if (const auto* b = std::get_if<bool>(&a)) {
      v.kind = fb_cuda::ValueKind::Bool;
      v.b = *b;
    } else if (const auto* l = std::get_if<graph::IntList>(&a)) {
      v.kind = fb_cuda::ValueKind::IntList;
      for (const auto& s : *l) {
        HF2PTE_ASSIGN_OR_RETURN(uint32_t e, expr(s));
        v.exprs.push_back(e);
      }
    } else if (const auto* tl = std::get_if<graph::TensorList>(&a)) {
      v.kind = fb_cuda::ValueKind::TensorList;
      for (auto t : *tl) {
        HF2PTE_ASSIGN_OR_RETURN(uint32_t idx, add_tensor(t, fb_cuda::TensorRole::Intermediate));
        v.tensors.push_back(int32_t(values_[idx].tensor));
      }
    } else if (const auto* ol = std::get_if<graph::OptTensorList>(&a)) {
      v.kind = fb_cuda::ValueKind::OptTensorList;
      for (const auto& t : *ol) {
        if (!t) {
          v.tensors.push_back(-1);
          continue;
        }
        HF2PTE_ASSIGN_OR_RETURN(uint32_t idx, add_tensor(*t, fb_cuda::TensorRole::Intermediate));
        v.tensors.push_back(int32_t(values_[idx].tensor));
      }
    } else if (const auto* st = std::get_if<ScalarType>(&a)) {
      v.kind = fb_cuda::ValueKind::ScalarType;
      v.scalar_type = *st;
    }
    return add_value(std::move(v));
  }

  Status add_node(const Node& n) {
    const auto& info = op_info(n.op);
    const auto& schema = op_schema(n.op);
    NodeSpec spec;
    spec.op = info.kernel_key();
    spec.name = n.name;
    size_t out_i = 0, arg_i = 0;
    for (const auto& a : schema.args) {
      Result<uint32_t> idx = a.is_out ? add_tensor(n.outputs.at(out_i++), fb_cuda::TensorRole::Intermediate)
                                      : add_arg(n.args.at(arg_i++));
      if (!idx) return idx.status().with_context(n.name);
      spec.args.push_back(*idx);
    }
    nodes_out_.push_back(std::move(spec));
    return Status::ok();
  }

  /// Each dim is read from the first delegate input that has it as a size;
  /// failing that, the method input the dim comes from joins the inputs.
  Status resolve_dims(std::vector<ValueId>& inputs) {
    for (const auto& name : dim_names_) {
      const SymInt want = SymInt::dim(name);
      bool found = false;
      for (size_t i = 0; i < inputs.size() && !found; ++i) {
        const auto& sizes = g_.type(inputs[i]).sizes;
        for (size_t a = 0; a < sizes.size() && !found; ++a) {
          if (sizes[a] == want) {
            dims_.push_back({name, uint32_t(i), uint32_t(a)});
            found = true;
          }
        }
      }
      auto src = g_.dim_sources().find(name);
      if (!found && src != g_.dim_sources().end()) {
        inputs.push_back(src->second.input);
        HF2PTE_RETURN_IF_ERROR(
            add_tensor(src->second.input, fb_cuda::TensorRole::Input, uint32_t(inputs.size() - 1)).status());
        dims_.push_back({name, uint32_t(inputs.size() - 1), uint32_t(src->second.axis)});
        found = true;
      }
      if (!found) {
        return make_error(ErrorCode::kNotSupported,
                          "dim '{}' of a CUDA partition is neither a size of its inputs nor of a method input", name);
      }
    }
    return Status::ok();
  }

  /// Greedy best-fit over lifetimes [first def, last use] in run order, by
  /// decreasing size, so intermediates alive at once never overlap.
  void plan_arena() {
    struct Interval {
      uint32_t tensor;
      size_t first, last;
      uint64_t bytes;
    };
    std::unordered_map<uint32_t, std::pair<size_t, size_t>> life;
    for (size_t k = 0; k < nodes_out_.size(); ++k) {
      for (uint32_t a : nodes_out_[k].args) {
        std::vector<uint32_t> ts;
        const auto& v = values_[a];
        if (v.kind == fb_cuda::ValueKind::Tensor) ts.push_back(v.tensor);
        for (int32_t t : v.tensors) if (t >= 0) ts.push_back(uint32_t(t));
        for (uint32_t t : ts) {
          auto [it, inserted] = life.emplace(t, std::make_pair(k, k));
          if (!inserted) it->second.second = k;
        }
      }
    }
    std::vector<Interval> todo;
    for (const auto& [t, span] : life) {
      const auto& spec = tensors_[t];
      if (spec.role != fb_cuda::TensorRole::Intermediate) continue;
      uint64_t n = element_size(spec.dtype);
      for (int64_t s : spec.max_sizes) n *= uint64_t(std::max<int64_t>(s, 0));
      todo.push_back({t, span.first, span.second, (std::max<uint64_t>(n, 1) + kArenaAlignment - 1) / kArenaAlignment *
                                                      kArenaAlignment});
    }
    std::sort(todo.begin(), todo.end(), [](const Interval& a, const Interval& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.tensor < b.tensor;
    });
    std::vector<Interval> placed;
    for (const auto& iv : todo) {
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (const auto& p : placed) {
        if (p.first <= iv.last && iv.first <= p.last) {
          busy.push_back({tensors_[p.tensor].offset, tensors_[p.tensor].offset + p.bytes});
        }
      }
      std::sort(busy.begin(), busy.end());
      uint64_t offset = 0;
      for (const auto& [lo, hi] : busy) {
        if (offset + iv.bytes <= lo) break;
        offset = std::max(offset, hi);
      }
      tensors_[iv.tensor].offset = offset;
      arena_bytes_ = std::max(arena_bytes_, offset + iv.bytes);
      placed.push_back(iv);
    }
  }

  std::vector<uint8_t> serialize(uint32_t num_inputs, uint32_t num_outputs) {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<fb_cuda::Dim>> dims;
    for (const auto& d : dims_) {
      const auto& r = g_.dims().at(d.name);
      dims.push_back(fb_cuda::CreateDimDirect(fbb, d.name.c_str(), r.min, r.max, d.input, d.axis));
    }
    std::vector<flatbuffers::Offset<fb_cuda::Tensor>> tensors;
    for (const auto& t : tensors_) {
      tensors.push_back(fb_cuda::CreateTensorDirect(fbb, int8_t(t.dtype), &t.sizes, &t.max_sizes, t.role, t.io_index,
                                                    t.key.empty() ? nullptr : t.key.c_str(), t.offset));
    }
    std::vector<flatbuffers::Offset<fb_cuda::Value>> values;
    for (const auto& v : values_) {
      values.push_back(fb_cuda::CreateValueDirect(fbb, v.kind, v.tensor, v.exprs.empty() ? nullptr : &v.exprs, v.f,
                                                  v.b, v.tensors.empty() ? nullptr : &v.tensors,
                                                  int8_t(v.scalar_type)));
    }
    std::vector<flatbuffers::Offset<fb_cuda::Node>> nodes;
    for (const auto& n : nodes_out_) {
      nodes.push_back(fb_cuda::CreateNodeDirect(fbb, n.op.c_str(), &n.args, n.name.c_str()));
    }
    auto root = fb_cuda::CreateGraphDirect(fbb, kPayloadVersion, &dims, &exprs_, &tensors, &values, &nodes,
                                           num_inputs, num_outputs, arena_bytes_);
    fb_cuda::FinishGraphBuffer(fbb, root);
    return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
  }

  struct DimSpec {
    std::string name;
    uint32_t input, axis;
  };

  const Graph& g_;
  const std::vector<Node>& nodes_;
  size_t begin_, end_;
  std::vector<fb_cuda::Expr> exprs_;
  std::unordered_map<SymInt, uint32_t, graph::SymIntHash> expr_ids_;
  std::vector<std::string> dim_names_;
  std::unordered_map<std::string, uint32_t> dim_ids_;
  std::vector<DimSpec> dims_;
  std::vector<TensorSpec> tensors_;
  std::vector<ValueId> tensor_of_value_;
  std::vector<ValueSpec> values_;
  std::unordered_map<ValueId, uint32_t> value_of_tensor_;
  std::vector<NodeSpec> nodes_out_;
  std::vector<graph::NamedConstant> named_;
  uint64_t arena_bytes_ = 0;
};

}  // namespace

Result<CudaPartitionStats> partition_for_cuda(Graph& g) {
  CudaPartitionStats stats;
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> claimed(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    claimed[i] = claimable(g, nodes[i]);
    if (!claimed[i]) ++stats.unsupported[std::string(op_info(nodes[i].op).kernel_key())];
  }
  // Where each value is used: node indices (graph outputs count as a use after every node).
  std::unordered_map<ValueId, std::vector<size_t>> uses;
  for (size_t i = 0; i < nodes.size(); ++i) graph::for_each_tensor_arg(nodes[i], [&](ValueId v) { uses[v].push_back(i); });
  for (auto v : g.outputs()) uses[v].push_back(nodes.size());

  std::vector<Node> rewritten;
  for (size_t i = 0; i < nodes.size();) {
    if (!claimed[i]) {
      rewritten.push_back(std::move(nodes[i]));
      ++i;
      continue;
    }
    // A maximal run in node order: contiguous, so it cannot form a cycle with the rest.
    size_t end = i;
    while (end < nodes.size() && claimed[end]) ++end;
    std::unordered_set<ValueId> produced, seen, used_outside;
    std::vector<ValueId> inputs, outputs;
    for (size_t k = i; k < end; ++k) {
      graph::for_each_tensor_arg(nodes[k], [&](ValueId v) {
        const auto role = g.value(v).role;
        if (!produced.count(v) && role != ValueRole::kConstant && seen.insert(v).second) inputs.push_back(v);
      });
      for (auto o : nodes[k].outputs) produced.insert(o);
    }
    for (auto v : inputs) {
      for (size_t u : uses[v]) if (u < i || u >= end) used_outside.insert(v);
    }
    for (size_t k = i; k < end; ++k) {
      for (auto o : nodes[k].outputs) {
        const auto& us = uses[o];
        if (std::any_of(us.begin(), us.end(), [&](size_t u) { return u >= end; })) outputs.push_back(o);
      }
    }
    if (outputs.empty()) {  // nothing to bind: keep it as kernels
      for (size_t k = i; k < end; ++k) {
        ++stats.unsupported[std::string(op_info(nodes[k].op).kernel_key())];
        rewritten.push_back(std::move(nodes[k]));
      }
      i = end;
      continue;
    }
    RunLowering lowering(g, nodes, i, end);
    auto d = lowering.lower(inputs, outputs, used_outside);
    if (!d) return d.status();
    stats.arena_bytes += lowering.arena_bytes();
    rewritten.push_back(graph::delegate_call(g, std::move(*d), fmt::format("cuda.{}", stats.partitions), inputs, outputs));
    stats.claimed_nodes += int(end - i);
    ++stats.partitions;
    i = end;
  }
  g.mutable_nodes() = std::move(rewritten);
  return stats;
}

}  // namespace hf2pte::cuda
