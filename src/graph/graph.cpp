#include "graph/graph.h"

#include <cstring>

#include <fmt/format.h>

#include "graph/shapes.h"

namespace hf2pte::graph {

bool TensorType::is_dynamic() const {
  for (const auto& s : sizes) {
    if (!s.is_constant()) return true;
  }
  return false;
}

std::string TensorType::str() const {
  std::string s(scalar_type_name(dtype));
  s += "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += sizes[i].str();
  }
  s += "]";
  bool contiguous = true;
  for (size_t i = 0; i < dim_order.size(); ++i) contiguous &= dim_order[i] == i;
  if (!contiguous) {
    s += "{";
    for (size_t i = 0; i < dim_order.size(); ++i) s += (i ? "," : "") + std::to_string(dim_order[i]);
    s += "}";
  }
  return s;
}

std::vector<int64_t> TensorType::upper_bounds(const DimRanges& ranges) const {
  std::vector<int64_t> out;
  out.reserve(sizes.size());
  for (const auto& s : sizes) out.push_back(s.upper_bound(ranges));
  return out;
}

std::vector<int64_t> TensorType::planning_bounds(const DimRanges& ranges) const {
  std::vector<int64_t> out;
  out.reserve(sizes.size());
  for (const auto& s : sizes) out.push_back(s.planning_bound(ranges));
  return out;
}

uint64_t ConstantData::nbytes() const {
  uint64_t n = element_size(dtype);
  for (auto s : sizes) n *= uint64_t(s);
  return n;
}

ConstantData ConstantData::from_bytes(ScalarType dtype, std::vector<int64_t> sizes, std::vector<uint8_t> bytes,
                                      std::string origin) {
  ConstantData c;
  c.dtype = dtype;
  c.sizes = std::move(sizes);
  c.origin = std::move(origin);
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  // An empty constant writes nothing (its data() may be null, which no sink takes).
  c.write = [shared](const Sink& sink) { return shared->empty() ? Status::ok() : sink(shared->data(), shared->size()); };
  return c;
}

ConstantData ConstantData::from_values(ScalarType dtype, std::vector<int64_t> sizes, const std::vector<double>& values,
                                       std::string origin) {
  const size_t es = element_size(dtype);
  std::vector<uint8_t> bytes(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = bytes.data() + i * es;
    const double v = values[i];
    auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
    switch (dtype) {
      case ScalarType::kFloat: put(float(v)); break;
      case ScalarType::kHalf: put(float_to_half(float(v))); break;
      case ScalarType::kBFloat16: put(float_to_bf16(float(v))); break;
      case ScalarType::kLong: put(int64_t(v)); break;
      case ScalarType::kInt: put(int32_t(v)); break;
      case ScalarType::kBool: put(uint8_t(v != 0)); break;
      default: break;  // builders make no other dtype (its bytes stay zero)
    }
  }
  return from_bytes(dtype, std::move(sizes), std::move(bytes), std::move(origin));
}

ConstantData recoded(const ConstantData& c, ScalarType dtype, std::vector<int64_t> sizes, const char* key_suffix,
                     size_t unit, std::function<void(const uint8_t* in, size_t units, std::vector<uint8_t>& out)> encode) {
  ConstantData p = c;
  p.dtype = dtype;
  p.sizes = std::move(sizes);
  p.dedup_key = c.dedup_key.empty() ? "" : c.dedup_key + key_suffix;
  p.transposed = nullptr;
  p.converted = nullptr;
  p.write = [c, unit, encode](const ConstantData::Sink& sink) -> Status {
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

ConstantData ConstantData::scalar(ScalarType dtype, double value) {
  return from_values(dtype, {}, {value}, fmt::format("scalar {}", value));
}

SymInt Graph::add_dim(const std::string& name, int64_t min, int64_t max) {
  dims_[name] = DimRange{min, max};
  return SymInt::dim(name);
}

ValueId Graph::add_value(Value v) {
  values_.push_back(std::move(v));
  return ValueId(values_.size() - 1);
}

ValueId Graph::add_input(const std::string& name, TensorType type) {
  for (size_t axis = 0; axis < type.sizes.size(); ++axis) {
    const auto& s = type.sizes[axis];
    if (s.kind() == SymInt::Kind::kDim && !dim_sources_.count(s.dim_name())) {
      dim_sources_[s.dim_name()] = DimSource{ValueId(values_.size()), int(axis)};
    }
  }
  Value v;
  v.name = name;
  v.role = ValueRole::kInput;
  v.type = std::move(type);
  ValueId id = add_value(std::move(v));
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(const std::string& name, ConstantData data) {
  Value v;
  v.name = name;
  v.role = ValueRole::kConstant;
  v.type.dtype = data.dtype;
  for (auto s : data.sizes) v.type.sizes.emplace_back(s);
  v.constant_idx = int32_t(constants_.size());
  constants_.push_back(std::move(data));
  return add_value(std::move(v));
}

ValueId Graph::add_buffer(const std::string& name, TensorType type) {
  Value v;
  v.name = name;
  v.role = ValueRole::kBuffer;
  v.type = std::move(type);
  return add_value(std::move(v));
}

std::vector<ValueId> Graph::buffers() const {
  std::vector<ValueId> out;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].role == ValueRole::kBuffer) out.push_back(ValueId(i));
  }
  return out;
}

Result<std::vector<ValueId>> Graph::add_node(OpId op, std::vector<Arg> args, const std::string& name) {
  auto where = [&] { return fmt::format("node {}, op {}", name, op_info(op).kernel_key()); };
  if (auto st = fill_default_args(op, &args); !st) return st.with_context(where());
  for (const auto& a : args) {
    if (const auto* id = std::get_if<ValueId>(&a); id && (*id < 0 || size_t(*id) >= values_.size())) {
      return make_error(ErrorCode::kInternal, "argument refers to unknown value %{} ({})", *id, where());
    }
  }
  auto outs = infer_outputs(*this, op, args);
  if (!outs) return outs.status().with_context(where());
  Node node{op, std::move(args), {}, name};
  for (size_t i = 0; i < outs->size(); ++i) {
    Value v;
    v.name = outs->size() == 1 ? name : fmt::format("{}.{}", name, i);
    if (const auto* t = std::get_if<TensorType>(&(*outs)[i])) {
      v.type = *t;
    } else {
      v.role = ValueRole::kSymInt;
      v.sym = std::get<SymInt>((*outs)[i]);
    }
    node.outputs.push_back(add_value(std::move(v)));
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

Result<ValueId> Graph::add(OpId op, std::vector<Arg> args, const std::string& name) {
  HF2PTE_ASSIGN_OR_RETURN(auto outs, add_node(op, std::move(args), name));
  if (outs.size() != 1) {
    return make_error(ErrorCode::kInternal, "{} has {} outputs; expected 1", op_info(op).kernel_key(), outs.size());
  }
  return outs[0];
}

namespace {

Result<Arg> parse_default(const ArgSchema& a) {
  const std::string& d = *a.default_value;
  if (d == "None") return Arg{None{}};
  if (d == "True" || d == "False") return Arg{d == "True"};
  switch (a.type) {
    case ArgType::kInt: return Arg{SymInt(int64_t(std::stoll(d)))};
    case ArgType::kFloat: return Arg{std::stod(d)};
    case ArgType::kBool: return Arg{d == "True"};
    case ArgType::kScalar:
      if (d.find_first_of(".e") != std::string::npos) return Arg{std::stod(d)};
      return Arg{int64_t(std::stoll(d))};
    case ArgType::kIntList: {
      if (d == "[]") return Arg{IntList{}};
      break;
    }
    default: break;
  }
  return make_error(ErrorCode::kInternal, "cannot materialise default '{}' of argument {}", d, a.name);
}

}  // namespace

Status fill_default_args(OpId op, std::vector<Arg>* args) {
  const auto& schema = op_schema(op);
  size_t n = schema.num_non_out();
  if (args->size() > n) {
    return make_error(ErrorCode::kInternal, "{} takes {} arguments; got {}", op_info(op).kernel_key(), n, args->size());
  }
  for (size_t i = args->size(); i < n; ++i) {
    const auto& a = schema.args[i];
    if (!a.default_value) {
      return make_error(ErrorCode::kInternal, "{}: missing argument '{}'", op_info(op).kernel_key(), a.name);
    }
    HF2PTE_ASSIGN_OR_RETURN(Arg d, parse_default(a));
    args->push_back(std::move(d));
  }
  return Status::ok();
}

std::string arg_to_string(const Graph& g, const Arg& a) {
  struct Visitor {
    const Graph& g;
    std::string operator()(None) const { return "None"; }
    std::string operator()(ValueId id) const { return "%" + g.value(id).name; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const SymInt& s) const { return s.str(); }
    std::string operator()(const IntList& l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + l[i].str();
      return s + "]";
    }
    std::string operator()(const TensorList& l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", %" : "%") + g.value(l[i]).name;
      return s + "]";
    }
    std::string operator()(const OptTensorList& l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + (l[i] ? "%" + g.value(*l[i]).name : "None");
      return s + "]";
    }
    std::string operator()(ScalarType t) const { return std::string(scalar_type_name(t)); }
  };
  return std::visit(Visitor{g}, a);
}

std::string Graph::to_string() const {
  std::string s = fmt::format("graph {}(", name_);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    s += fmt::format("{}%{}: {}", i ? ", " : "", value(inputs_[i]).name, type(inputs_[i]).str());
  }
  s += ")\n";
  for (const auto& [name, r] : dims_) {
    s += fmt::format("  dim {} in [{}, {}]\n", name, r.min,
                     r.max == DimRange::kUnbounded ? std::string("inf") : std::to_string(r.max));
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    const auto& v = values_[i];
    if (v.role == ValueRole::kConstant) {
      s += fmt::format("  const %{}: {} = {}\n", v.name, v.type.str(), constants_[size_t(v.constant_idx)].origin);
    } else if (v.role == ValueRole::kBuffer) {
      s += fmt::format("  buffer %{}: {} = zeros\n", v.name, v.type.str());
    }
  }
  for (const auto& n : nodes_) {
    std::string outs;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const auto& v = value(n.outputs[i]);
      outs += fmt::format("{}%{}: {}", i ? ", " : "", v.name, v.role == ValueRole::kSymInt ? "int = " + v.sym.str() : v.type.str());
    }
    const auto& schema = op_schema(n.op);
    std::string args;
    for (size_t i = 0; i < n.args.size(); ++i) {
      args += fmt::format("{}{}={}", i ? ", " : "", schema.args[i].name, arg_to_string(*this, n.args[i]));
    }
    if (outs.empty()) outs = "()";
    s += fmt::format("  {} = {}({})\n", outs, op_info(n.op).short_name(), args);
  }
  s += "  return ";
  for (size_t i = 0; i < outputs_.size(); ++i) s += fmt::format("{}%{}", i ? ", " : "", value(outputs_[i]).name);
  return s + "\n";
}

}  // namespace hf2pte::graph
