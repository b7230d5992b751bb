#include "export/emit.h"

#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace hf2pte::exp {

namespace fb = executorch_flatbuffer;
using graph::Arg;
using graph::SymInt;
using graph::ValueId;

namespace {

constexpr char kLeafSpec[] = R"({"type": null, "context": null, "children_spec": []})";

/// Pytree spec strings as torch.export writes them: inputs are ((a, b, ...), {}).
std::string tuple_spec(size_t n) {
  std::string children;
  for (size_t i = 0; i < n; ++i) children += (i ? ", " : "") + std::string(kLeafSpec);
  return fmt::format(R"({{"type": "builtins.tuple", "context": "null", "children_spec": [{}]}})", children);
}
std::string inputs_spec(size_t n) {
  return fmt::format(R"([1, {{"type": "builtins.tuple", "context": "null", "children_spec": [{}, {{"type": "builtins.dict", "context": "[]", "children_spec": []}}]}}])",
                     tuple_spec(n));
}
std::string outputs_spec(size_t n) { return fmt::format("[1, {}]", n == 1 ? std::string(kLeafSpec) : tuple_spec(n)); }

pte::Blob blob_of(const graph::ConstantData& c) {
  pte::Blob b;
  b.size = c.nbytes();
  b.dedup_key = c.dedup_key;
  auto write = c.write;
  b.write = [write](pte::ByteSink& sink) {
    return write([&sink](const void* d, size_t n) { return sink.write(d, n); });
  };
  return b;
}

pte::Blob zeros_blob(uint64_t size) {
  pte::Blob b;
  b.size = size;
  b.dedup_key = fmt::format("zeros:{}", size);
  b.write = [size](pte::ByteSink& sink) -> Status {
    static const std::vector<uint8_t> kZeros(1 << 16, 0);
    for (uint64_t done = 0; done < size;) {
      size_t n = size_t(std::min<uint64_t>(kZeros.size(), size - done));
      HF2PTE_RETURN_IF_ERROR(sink.write(kZeros.data(), n));
      done += n;
    }
    return Status::ok();
  };
  return b;
}

/// Emits one method: owns the value table and the mapping from graph values.
class MethodEmitter {
 public:
  MethodEmitter(const graph::Graph& g, const MemoryPlan& plan, pte::PteContents& out, std::set<std::string>& named_keys)
      : g_(g), plan_(plan), out_(out), named_keys_(named_keys) {}

  Result<std::unique_ptr<fb::ExecutionPlanT>> emit() {
    auto ep = std::make_unique<fb::ExecutionPlanT>();
    ep_ = ep.get();
    ep->name = g_.name();
    for (auto v : g_.inputs()) {
      HF2PTE_ASSIGN_OR_RETURN(int idx, tensor_value(v));
      ep->inputs.push_back(idx);
    }
    auto chain = std::make_unique<fb::ChainT>();
    chain_ = chain.get();
    // Named dims are read from the inputs once, before any node needs them.
    for (const auto& [name, src] : g_.dim_sources()) {
      HF2PTE_ASSIGN_OR_RETURN(int t, tensor_value(src.input));
      int dim = int_value(src.axis);
      int out = int_value(0);
      kernel_call(OpId::SymSizeInt, {t, dim, out});
      sym_values_[SymInt::dim(name)] = out;
    }
    for (const auto& node : g_.nodes()) HF2PTE_RETURN_IF_ERROR(emit_node(node).with_context(fmt::format("node {}", node.name)));
    for (auto v : g_.outputs()) {
      HF2PTE_ASSIGN_OR_RETURN(int idx, tensor_value(v));
      ep->outputs.push_back(idx);
    }
    ep->chains.push_back(std::move(chain));
    ep->non_const_buffer_sizes = {0, int64_t(plan_.arena_size)};
    ep->container_meta_type = std::make_unique<fb::ContainerMetadataT>();
    ep->container_meta_type->encoded_inp_str = inputs_spec(g_.inputs().size());
    ep->container_meta_type->encoded_out_str = outputs_spec(g_.outputs().size());
    return ep;
  }

 private:
  int add_value(fb::KernelTypesUnion u) {
    auto ev = std::make_unique<fb::EValueT>();
    ev->val = std::move(u);
    ep_->values.push_back(std::move(ev));
    return int(ep_->values.size() - 1);
  }
  int int_value(int64_t v) {
    fb::IntT x;
    x.int_val = v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    return add_value(std::move(u));
  }
  int double_value(double v) {
    fb::DoubleT x;
    x.double_val = v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    return add_value(std::move(u));
  }
  int bool_value(bool v) {
    fb::BoolT x;
    x.bool_val = v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    return add_value(std::move(u));
  }
  int null_value() {
    fb::KernelTypesUnion u;
    u.Set(fb::NullT{});
    return add_value(std::move(u));
  }

  /// The Int value holding `s`: a fresh constant, or the runtime value of a
  /// (compound) symbolic expression, computed once with prim ops.
  Result<int> sym_value(const SymInt& s) {
    if (s.is_constant()) return int_value(s.constant_value());
    if (auto it = sym_values_.find(s); it != sym_values_.end()) return it->second;
    OpId op;
    switch (s.kind()) {
      case SymInt::Kind::kAdd: op = OpId::PrimAddScalar; break;
      case SymInt::Kind::kSub: op = OpId::PrimSubScalar; break;
      case SymInt::Kind::kMul: op = OpId::PrimMulScalar; break;
      case SymInt::Kind::kFloorDiv: op = OpId::PrimFloordivScalar; break;
      default:
        return make_error(ErrorCode::kNotSupported, "symbolic size {} cannot be computed at runtime yet", s.str());
    }
    HF2PTE_ASSIGN_OR_RETURN(int a, sym_value(s.lhs()));
    HF2PTE_ASSIGN_OR_RETURN(int b, sym_value(s.rhs()));
    int out = int_value(0);
    kernel_call(op, {a, b, out});
    sym_values_[s] = out;
    return out;
  }

  Result<int> tensor_value(ValueId v) {
    if (auto it = tensor_values_.find(v); it != tensor_values_.end()) return it->second;
    const auto& val = g_.value(v);
    const auto& t = val.type;
    fb::TensorT tensor;
    tensor.scalar_type = fb::ScalarType(int8_t(t.dtype));
    for (auto s : t.planning_bounds(g_.dims())) {  // the sizes memory planning used
      if (s > INT32_MAX) return make_error(ErrorCode::kOutOfRange, "tensor %{} dim {} exceeds int32", val.name, s);
      tensor.sizes.push_back(int32_t(s));
    }
    for (int i = 0; i < t.rank(); ++i) tensor.dim_order.push_back(t.dim_order.empty() ? uint8_t(i) : t.dim_order[size_t(i)]);
    tensor.shape_dynamism = t.is_dynamic() ? fb::TensorShapeDynamism::DYNAMIC_BOUND : fb::TensorShapeDynamism::STATIC;
    if (val.role == graph::ValueRole::kConstant) {
      out_.constants.push_back(blob_of(g_.constant(v)));
      tensor.data_buffer_idx = uint32_t(out_.constants.size());
    } else if (auto it = plan_.offsets.find(v); it != plan_.offsets.end()) {
      tensor.allocation_info = std::make_unique<fb::AllocationDetailsT>();
      tensor.allocation_info->memory_id = 1;
      tensor.allocation_info->memory_offset_low = uint32_t(it->second & 0xFFFFFFFFu);
      tensor.allocation_info->memory_offset_high = uint32_t(it->second >> 32);
      if (val.role == graph::ValueRole::kBuffer) {
        // KV caches start as zeros: stored once (deduplicated) in the mutable segment.
        uint64_t nbytes = element_size(t.dtype);
        for (auto s : tensor.sizes) nbytes *= uint64_t(s);
        out_.mutable_data.push_back(zeros_blob(nbytes));
        tensor.data_buffer_idx = uint32_t(out_.mutable_data.size());
        tensor.extra_tensor_info = std::make_unique<fb::ExtraTensorInfoT>();
        tensor.extra_tensor_info->mutable_data_segments_idx = 0;
        tensor.extra_tensor_info->fully_qualified_name = val.name;
      }
    } else if (val.role == graph::ValueRole::kBuffer) {
      // alloc_mutable_buffers=false: no allocation_info and no initial value
      // (data_buffer_idx 0; a k > 0 without allocation_info would read as a
      // constant). The name is how the runtime finds it and the caller binds
      // its memory, as ExecuTorch requires emit_mutable_buffer_names for
      // unplanned mutable buffers (docs/decisions.md).
      tensor.extra_tensor_info = std::make_unique<fb::ExtraTensorInfoT>();
      tensor.extra_tensor_info->fully_qualified_name = val.name;
    }
    fb::KernelTypesUnion u;
    u.Set(std::move(tensor));
    int idx = add_value(std::move(u));
    tensor_values_[v] = idx;
    return idx;
  }

  int operator_index(OpId op) {
    const auto& info = op_info(op);
    auto key = info.kernel_key();
    if (auto it = operators_.find(key); it != operators_.end()) return it->second;
    auto o = std::make_unique<fb::OperatorT>();
    o->name = std::string(info.name);
    o->overload = std::string(info.overload);
    ep_->operators.push_back(std::move(o));
    int idx = int(ep_->operators.size() - 1);
    operators_[key] = idx;
    return idx;
  }

  void kernel_call(OpId op, std::vector<int32_t> args) {
    fb::KernelCallT call;
    call.op_index = operator_index(op);
    call.args = std::move(args);
    auto instr = std::make_unique<fb::InstructionT>();
    instr->instr_args.Set(std::move(call));
    chain_->instructions.push_back(std::move(instr));
  }

  Result<int> arg_value(const ArgSchema& schema, const Arg& a) {
    if (std::holds_alternative<graph::None>(a)) return null_value();
    switch (schema.type) {
      case ArgType::kTensor:
        if (const auto* v = std::get_if<ValueId>(&a)) return tensor_value(*v);
        break;
      case ArgType::kInt:
        if (const auto* v = std::get_if<int64_t>(&a)) return int_value(*v);
        if (const auto* s = std::get_if<SymInt>(&a)) return sym_value(*s);
        if (const auto* v = std::get_if<ValueId>(&a)) return sym_value(g_.value(*v).sym);
        break;
      case ArgType::kScalar:
        if (const auto* v = std::get_if<int64_t>(&a)) return int_value(*v);
        if (const auto* v = std::get_if<double>(&a)) return double_value(*v);
        if (const auto* v = std::get_if<bool>(&a)) return bool_value(*v);
        if (const auto* s = std::get_if<SymInt>(&a)) return sym_value(*s);
        if (const auto* v = std::get_if<ValueId>(&a)) return sym_value(g_.value(*v).sym);
        break;
      case ArgType::kFloat:
        if (const auto* v = std::get_if<double>(&a)) return double_value(*v);
        break;
      case ArgType::kBool:
        if (const auto* v = std::get_if<bool>(&a)) return bool_value(*v);
        break;
      case ArgType::kScalarType:
        if (const auto* v = std::get_if<ScalarType>(&a)) return int_value(int64_t(*v));
        break;
      case ArgType::kIntList:
        if (const auto* l = std::get_if<graph::IntList>(&a)) {
          fb::IntListT list;
          for (const auto& s : *l) {
            HF2PTE_ASSIGN_OR_RETURN(int item, sym_value(s));
            list.items.push_back(item);
          }
          fb::KernelTypesUnion u;
          u.Set(std::move(list));
          return add_value(std::move(u));
        }
        break;
      case ArgType::kTensorList:
        if (const auto* l = std::get_if<graph::TensorList>(&a)) {
          fb::TensorListT list;
          for (auto v : *l) {
            HF2PTE_ASSIGN_OR_RETURN(int item, tensor_value(v));
            list.items.push_back(item);
          }
          fb::KernelTypesUnion u;
          u.Set(std::move(list));
          return add_value(std::move(u));
        }
        break;
      case ArgType::kOptionalTensorList:
        if (const auto* l = std::get_if<graph::OptTensorList>(&a)) {
          fb::OptionalTensorListT list;
          for (const auto& v : *l) {
            int item = -1;
            if (v) { HF2PTE_ASSIGN_OR_RETURN(item, tensor_value(*v)); }
            list.items.push_back(item);
          }
          fb::KernelTypesUnion u;
          u.Set(std::move(list));
          return add_value(std::move(u));
        }
        break;
      default:
        break;
    }
    return make_error(ErrorCode::kInternal, "argument '{}' has a value the emitter cannot encode", schema.name);
  }

  // KernelCall args = one value per schema argument (outs included) + one
  // return slot: the out for out-variants, the result for functional ops,
  // `self` for in-place ops.
  // A delegated subgraph: BackendDelegate {id, processed {SEGMENT, k}, no
  // compile specs} with the payload as delegates[k], its weights as named data
  // (stored once per key program-wide), and DelegateCall args = inputs then
  // outputs (the payload's external ids, docs/pte-format.md §4).
  Status emit_delegate(const graph::Node& node) {
    const auto* idx = std::get_if<int64_t>(&node.args.at(0));
    const auto* inputs = std::get_if<graph::TensorList>(&node.args.at(1));
    if (idx == nullptr || inputs == nullptr || *idx < 0 || size_t(*idx) >= g_.delegates().size()) {
      return make_error(ErrorCode::kInternal, "malformed delegate call");
    }
    const graph::Delegate& d = g_.delegates()[size_t(*idx)];
    auto payload = std::make_shared<const std::vector<uint8_t>>(d.payload);
    pte::Blob blob;
    blob.size = payload->size();
    blob.write = [payload](pte::ByteSink& sink) { return sink.write(payload->data(), payload->size()); };
    out_.delegates.push_back(std::move(blob));
    auto bd = std::make_unique<fb::BackendDelegateT>();
    bd->id = d.backend_id;
    bd->processed = std::make_unique<fb::BackendDelegateDataReferenceT>();
    bd->processed->location = fb::DataLocation::SEGMENT;
    bd->processed->index = uint32_t(out_.delegates.size() - 1);
    ep_->delegates.push_back(std::move(bd));
    for (const auto& n : d.named) {
      if (named_keys_.insert(n.key).second) out_.named.push_back({n.key, blob_of(n.data)});
    }
    fb::DelegateCallT call;
    call.delegate_index = int32_t(ep_->delegates.size() - 1);
    for (auto v : *inputs) {
      HF2PTE_ASSIGN_OR_RETURN(int i, tensor_value(v));
      call.args.push_back(i);
    }
    for (auto v : node.outputs) {
      HF2PTE_ASSIGN_OR_RETURN(int i, tensor_value(v));
      call.args.push_back(i);
    }
    auto instr = std::make_unique<fb::InstructionT>();
    instr->instr_args.Set(std::move(call));
    chain_->instructions.push_back(std::move(instr));
    return Status::ok();
  }

  Status emit_node(const graph::Node& node) {
    if (node.op == OpId::DelegateCall) return emit_delegate(node);
    const auto& info = op_info(node.op);
    if (!info.has_kernel) {
      return make_error(ErrorCode::kInternal, "{} reached emission; it must be lowered first", info.kernel_key());
    }
    const auto& schema = op_schema(node.op);
    std::vector<int32_t> args;
    size_t out_i = 0, arg_i = 0;
    for (const auto& a : schema.args) {
      if (a.is_out) {
        HF2PTE_ASSIGN_OR_RETURN(int v, tensor_value(node.outputs.at(out_i++)));
        args.push_back(v);
      } else {
        HF2PTE_ASSIGN_OR_RETURN(int v, arg_value(a, node.args.at(arg_i++)));
        args.push_back(v);
      }
    }
    if (schema.num_outs() == 1) {
      args.push_back(args[schema.args.size() - 1]);
    } else if (schema.num_outs() > 1) {
      // As upstream's emitter: the return slot of a multi-out op is a TensorList of its outs.
      fb::TensorListT list;
      for (ValueId o : node.outputs) {
        HF2PTE_ASSIGN_OR_RETURN(int item, tensor_value(o));
        list.items.push_back(item);
      }
      fb::KernelTypesUnion u;
      u.Set(std::move(list));
      args.push_back(add_value(std::move(u)));
    } else if (!node.outputs.empty()) {
      ValueId r = node.outputs[0];
      if (g_.value(r).role == graph::ValueRole::kSymInt) {
        int out = int_value(0);
        sym_values_[g_.value(r).sym] = out;
        args.push_back(out);
      } else {
        HF2PTE_ASSIGN_OR_RETURN(int v, tensor_value(r));
        args.push_back(v);
      }
    } else {
      args.push_back(args[0]);  // in place: the result is `self`
    }
    kernel_call(node.op, std::move(args));
    // A data-dependent size first appears on an out of the op that sets it
    // (nonzero): read it right after that op, once, so later nodes can take it
    // as an Int without extending the out's lifetime in the memory plan.
    for (ValueId out : node.outputs) {
      const auto& sizes = g_.value(out).type.sizes;
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d].kind() != SymInt::Kind::kUnbacked || sym_values_.count(sizes[d])) continue;
        HF2PTE_ASSIGN_OR_RETURN(int t, tensor_value(out));
        int dim = int_value(int64_t(d));
        int value = int_value(0);
        kernel_call(OpId::SymSizeInt, {t, dim, value});
        sym_values_[sizes[d]] = value;
      }
    }
    return Status::ok();
  }

  const graph::Graph& g_;
  const MemoryPlan& plan_;
  pte::PteContents& out_;
  std::set<std::string>& named_keys_;
  fb::ExecutionPlanT* ep_ = nullptr;
  fb::ChainT* chain_ = nullptr;
  std::unordered_map<ValueId, int> tensor_values_;
  std::unordered_map<SymInt, int, graph::SymIntHash> sym_values_;  ///< runtime Int value of each expression
  std::map<std::string, int> operators_;
};

std::unique_ptr<fb::ExecutionPlanT> constant_method(const std::string& name, const graph::ConstantMethodValue& value) {
  auto ep = std::make_unique<fb::ExecutionPlanT>();
  ep->name = name;
  auto add = [&](fb::KernelTypesUnion u) {
    auto ev = std::make_unique<fb::EValueT>();
    ev->val = std::move(u);
    ep->values.push_back(std::move(ev));
    ep->outputs.push_back(int(ep->values.size() - 1));
  };
  auto add_int = [&](int64_t v) {
    fb::IntT x;
    x.int_val = v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    add(std::move(u));
  };
  if (const auto* v = std::get_if<int64_t>(&value)) add_int(*v);
  if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) for (auto x : *v) add_int(x);
  if (const auto* v = std::get_if<double>(&value)) {
    fb::DoubleT x;
    x.double_val = *v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    add(std::move(u));
  }
  if (const auto* v = std::get_if<bool>(&value)) {
    fb::BoolT x;
    x.bool_val = *v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    add(std::move(u));
  }
  if (const auto* v = std::get_if<std::string>(&value)) {
    fb::StringT x;
    x.string_val = *v;
    fb::KernelTypesUnion u;
    u.Set(std::move(x));
    add(std::move(u));
  }
  ep->chains.push_back(std::make_unique<fb::ChainT>());
  ep->non_const_buffer_sizes = {0};
  ep->container_meta_type = std::make_unique<fb::ContainerMetadataT>();
  ep->container_meta_type->encoded_out_str = outputs_spec(ep->outputs.size());
  return ep;
}

}  // namespace

Result<pte::PteContents> emit_program(const graph::Program& program, const std::vector<MemoryPlan>& plans) {
  pte::PteContents out;
  out.program.version = 0;
  // Methods sorted by name, then constant methods (sorted by the map), as upstream.
  std::vector<size_t> order(program.methods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return program.methods[a].name() < program.methods[b].name(); });
  std::set<std::string> named_keys;
  for (size_t i : order) {
    MethodEmitter em(program.methods[i], plans.at(i), out, named_keys);
    HF2PTE_ASSIGN_OR_RETURN(auto ep, em.emit());
    out.program.execution_plan.push_back(std::move(ep));
  }
  for (const auto& [name, value] : program.constant_methods) out.program.execution_plan.push_back(constant_method(name, value));
  return out;
}

}  // namespace hf2pte::exp
