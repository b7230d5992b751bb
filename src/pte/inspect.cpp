#include "pte/inspect.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/scalar_type.h"

namespace hf2pte::pte {
namespace efb = executorch_flatbuffer;
using Json = nlohmann::ordered_json;

namespace {

/// Constant tensors show at most this many elements.
constexpr size_t kMaxShownElements = 16;

std::string dtype_name(efb::ScalarType type) {
  const int code = int(type);
  if (is_known_scalar_type(code)) return std::string(scalar_type_name(ScalarType(code)));
  // Types the schema knows but we do not compute with (QUINT4X2, FLOAT8...).
  const char* name = efb::EnumNameScalarType(type);
  if (name != nullptr && name[0] != '\0') return name;
  return fmt::format("?({})", code);
}

const char* dynamism_name(efb::TensorShapeDynamism dynamism) {
  switch (dynamism) {
    case efb::TensorShapeDynamism::STATIC: return "static";
    case efb::TensorShapeDynamism::DYNAMIC_BOUND: return "dynamic_bound";
    case efb::TensorShapeDynamism::DYNAMIC_UNBOUND: return "dynamic_unbound";
  }
  return "?";
}

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD. Strings in a
/// .pte are untrusted bytes, and nlohmann::json throws when it dumps invalid
/// UTF-8, so everything taken from the file (or a path) goes through here.
std::string utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = uint8_t(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = uint8_t(text[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    if (ok) {
      ok = (len == 1) || (len == 2 && cp >= 0x80) || (len == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
           (len == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    }
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string str(const flatbuffers::String* s) { return s != nullptr ? utf8(s->string_view()) : std::string(); }

template <typename T>
uint32_t count(const flatbuffers::Vector<T>* v) {
  return v != nullptr ? v->size() : 0;
}

/// Where a tensor's data comes from (pte-format.md §3).
const char* tensor_storage(const efb::Tensor& tensor) {
  const bool planned = tensor.allocation_info() != nullptr;
  if (tensor.data_buffer_idx() == 0) return planned ? "planned" : "none";
  return planned ? "planned+initial" : "constant";
}

/// Element count and byte size of a tensor; false for negative sizes,
/// overflow or an element type we cannot size.
bool tensor_nbytes(const efb::Tensor& tensor, uint64_t* numel, uint64_t* nbytes) {
  uint64_t n = 1;
  if (const auto* sizes = tensor.sizes()) {
    for (int32_t size : *sizes) {
      if (size < 0 || __builtin_mul_overflow(n, uint64_t(size), &n)) return false;
    }
  }
  const int code = int(tensor.scalar_type());
  if (!is_known_scalar_type(code)) return false;
  const size_t element = element_size(ScalarType(code));
  if (element == 0 || __builtin_mul_overflow(n, uint64_t(element), nbytes)) return false;
  *numel = n;
  return true;
}

/// One element of `bytes` (little-endian, `type`) as a JSON number or bool.
Json decode_element(ScalarType type, const uint8_t* p) {
  auto load = [p](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (type) {
    case ScalarType::kByte: case ScalarType::kQUInt8: return load(uint8_t{});
    case ScalarType::kChar: case ScalarType::kQInt8: return load(int8_t{});
    case ScalarType::kShort: return load(int16_t{});
    case ScalarType::kInt: case ScalarType::kQInt32: return load(int32_t{});
    case ScalarType::kLong: return load(int64_t{});
    case ScalarType::kUInt16: return load(uint16_t{});
    case ScalarType::kUInt32: return load(uint32_t{});
    case ScalarType::kUInt64: return load(uint64_t{});
    case ScalarType::kHalf: return half_to_float(load(uint16_t{}));
    case ScalarType::kBFloat16: return bf16_to_float(load(uint16_t{}));
    case ScalarType::kFloat: return load(float{});
    case ScalarType::kDouble: return load(double{});
    case ScalarType::kBool: return load(uint8_t{}) != 0;
  }
  return "?";
}

Json tensor_json(const efb::Tensor& tensor) {
  Json out;
  out["type"] = "tensor";
  out["dtype"] = dtype_name(tensor.scalar_type());
  Json sizes = Json::array();
  if (const auto* s = tensor.sizes()) {
    for (int32_t size : *s) sizes.push_back(size);
  }
  out["sizes"] = std::move(sizes);
  out["dynamism"] = dynamism_name(tensor.shape_dynamism());
  out["data"] = tensor_storage(tensor);
  return out;
}

/// Describes plan value `index`; {"type": "?"} for an index outside the plan.
Json value_json(const efb::ExecutionPlan& plan, int64_t index) {
  Json out;
  out["value"] = index;
  const auto* values = plan.values();
  if (index < 0 || index >= int64_t(count(values))) {
    out["type"] = "?";
    return out;
  }
  const efb::EValue* value = values->Get(uint32_t(index));
  // The verifier accepts a union whose tag is set but whose table is absent,
  // so every val_as_X() below may be null: check once, here.
  if (value->val() == nullptr && value->val_type() != efb::KernelTypes::Null) {
    out["type"] = "?";
    return out;
  }
  switch (value->val_type()) {
    case efb::KernelTypes::Null: out["type"] = "none"; break;
    case efb::KernelTypes::Int:
      out["type"] = "int";
      out["value_int"] = value->val_as_Int()->int_val();
      break;
    case efb::KernelTypes::Bool:
      out["type"] = "bool";
      out["value_bool"] = value->val_as_Bool()->bool_val();
      break;
    case efb::KernelTypes::Double:
      out["type"] = "double";
      out["value_double"] = value->val_as_Double()->double_val();
      break;
    case efb::KernelTypes::String:
      out["type"] = "string";
      out["value_string"] = str(value->val_as_String()->string_val());
      break;
    case efb::KernelTypes::Tensor: out.update(tensor_json(*value->val_as_Tensor())); break;
    case efb::KernelTypes::IntList:
      out["type"] = "int_list";
      out["length"] = count(value->val_as_IntList()->items());
      break;
    case efb::KernelTypes::DoubleList:
      out["type"] = "double_list";
      out["length"] = count(value->val_as_DoubleList()->items());
      break;
    case efb::KernelTypes::BoolList:
      out["type"] = "bool_list";
      out["length"] = count(value->val_as_BoolList()->items());
      break;
    case efb::KernelTypes::TensorList:
      out["type"] = "tensor_list";
      out["length"] = count(value->val_as_TensorList()->items());
      break;
    case efb::KernelTypes::OptionalTensorList:
      out["type"] = "optional_tensor_list";
      out["length"] = count(value->val_as_OptionalTensorList()->items());
      break;
    default: out["type"] = "?"; break;  // NONE or a tag from a newer schema
  }
  return out;
}

/// The value of a constant method's output, or null when the method is not one:
/// a getter has no instructions and returns one Int/Bool/Double/String or a
/// constant tensor.
Json constant_json(const PteFile& file, const efb::ExecutionPlan& plan, uint64_t instructions) {
  const auto* outputs = plan.outputs();
  if (instructions != 0 || count(outputs) != 1) return nullptr;
  const int32_t index = outputs->Get(0);
  if (index < 0 || index >= int32_t(count(plan.values()))) return nullptr;
  const efb::EValue* value = plan.values()->Get(uint32_t(index));
  if (value->val() == nullptr) return nullptr;  // tag without a table (see value_json)
  Json out;
  switch (value->val_type()) {
    case efb::KernelTypes::Int:
      out["type"] = "int";
      out["value"] = value->val_as_Int()->int_val();
      return out;
    case efb::KernelTypes::Bool:
      out["type"] = "bool";
      out["value"] = value->val_as_Bool()->bool_val();
      return out;
    case efb::KernelTypes::Double:
      out["type"] = "double";
      out["value"] = value->val_as_Double()->double_val();
      return out;
    case efb::KernelTypes::String:
      out["type"] = "string";
      out["value"] = str(value->val_as_String()->string_val());
      return out;
    case efb::KernelTypes::Tensor: break;
    default: return nullptr;
  }
  const efb::Tensor& tensor = *value->val_as_Tensor();
  if (tensor.data_buffer_idx() == 0 || tensor.allocation_info() != nullptr) return nullptr;
  out = tensor_json(tensor);
  out.erase("data");
  uint64_t numel = 0;
  uint64_t nbytes = 0;
  if (!tensor_nbytes(tensor, &numel, &nbytes)) {
    out["error"] = "cannot size this tensor";
    return out;
  }
  auto data = file.constant_data(tensor.data_buffer_idx(), size_t(nbytes));
  if (!data) {
    out["error"] = utf8(data.status().message());
    return out;
  }
  const auto type = ScalarType(int(tensor.scalar_type()));
  const size_t element = element_size(type);
  Json values = Json::array();
  for (uint64_t i = 0; i < std::min<uint64_t>(numel, kMaxShownElements); ++i) {
    values.push_back(decode_element(type, data->data() + i * element));
  }
  out["values"] = std::move(values);
  if (numel > kMaxShownElements) out["truncated"] = true;
  return out;
}

Json method_json(const PteFile& file, const efb::ExecutionPlan& plan, const InspectOptions& options) {
  Json out;
  out["name"] = str(plan.name());
  Json inputs = Json::array();
  if (const auto* v = plan.inputs()) {
    for (int32_t index : *v) inputs.push_back(value_json(plan, index));
  }
  out["inputs"] = std::move(inputs);
  Json outputs = Json::array();
  if (const auto* v = plan.outputs()) {
    for (int32_t index : *v) outputs.push_back(value_json(plan, index));
  }
  out["outputs"] = std::move(outputs);

  // Count instructions per operator and per delegate; references outside the
  // tables are collected under "?".
  const uint32_t num_operators = count(plan.operators());
  const uint32_t num_delegates = count(plan.delegates());
  std::vector<uint64_t> op_calls(num_operators, 0);
  std::vector<uint64_t> delegate_calls(num_delegates, 0);
  uint64_t bad_op_calls = 0;
  uint64_t bad_delegate_calls = 0;
  uint64_t instructions = 0;
  std::map<std::string, uint64_t> other;  // moves, jumps, frees
  if (const auto* chains = plan.chains()) {
    for (const efb::Chain* chain : *chains) {
      const auto* list = chain->instructions();
      if (list == nullptr) continue;
      instructions += list->size();
      for (const efb::Instruction* instruction : *list) {
        if (instruction->instr_args() == nullptr) {  // tag without a table (see value_json)
          ++other["?"];
          continue;
        }
        switch (instruction->instr_args_type()) {
          case efb::InstructionArguments::KernelCall: {
            const int32_t op = instruction->instr_args_as_KernelCall()->op_index();
            if (op >= 0 && uint32_t(op) < num_operators) {
              ++op_calls[uint32_t(op)];
            } else {
              ++bad_op_calls;
            }
            break;
          }
          case efb::InstructionArguments::DelegateCall: {
            const int32_t d = instruction->instr_args_as_DelegateCall()->delegate_index();
            if (d >= 0 && uint32_t(d) < num_delegates) {
              ++delegate_calls[uint32_t(d)];
            } else {
              ++bad_delegate_calls;
            }
            break;
          }
          case efb::InstructionArguments::MoveCall: ++other["move"]; break;
          case efb::InstructionArguments::JumpFalseCall: ++other["jump_false"]; break;
          case efb::InstructionArguments::FreeCall: ++other["free"]; break;
          default: ++other["?"]; break;
        }
      }
    }
  }
  out["values"] = count(plan.values());
  out["chains"] = count(plan.chains());
  out["instructions"] = instructions;

  Json operators = Json::array();
  for (uint32_t i = 0; i < num_operators; ++i) {
    const efb::Operator* op = plan.operators()->Get(i);
    std::string name = op->name() != nullptr ? str(op->name()) : "?";
    if (op->overload() != nullptr && op->overload()->size() > 0) name += "." + str(op->overload());
    operators.push_back(Json{{"name", name}, {"instructions", op_calls[i]}});
  }
  if (bad_op_calls > 0) operators.push_back(Json{{"name", "?"}, {"instructions", bad_op_calls}});
  out["operators"] = std::move(operators);

  Json delegates = Json::array();
  for (uint32_t i = 0; i < num_delegates; ++i) {
    const efb::BackendDelegate* delegate = plan.delegates()->Get(i);
    Json d;
    d["index"] = i;
    d["id"] = delegate->id() != nullptr ? str(delegate->id()) : "?";
    if (const efb::BackendDelegateDataReference* ref = delegate->processed()) {
      d["location"] = ref->location() == efb::DataLocation::INLINE    ? "inline"
                      : ref->location() == efb::DataLocation::SEGMENT ? "segment"
                                                                       : "?";
      d["data_index"] = ref->index();
      auto bytes = file.delegate_data(*ref);
      if (bytes) {
        d["size"] = bytes->size();
        if (options.describe_delegate && delegate->id() != nullptr) {
          // A payload the describer rejects is reported, not fatal: inspect
          // must describe broken files too.
          auto nodes = options.describe_delegate(delegate->id()->string_view(), *bytes, file);
          if (nodes) {
            Json list = Json::array();
            uint64_t total = 0;
            for (const auto& [type, n] : *nodes) {
              list.push_back(Json{{"type", utf8(type)}, {"count", n}});
              total += n;
            }
            d["node_count"] = total;
            d["nodes"] = std::move(list);
          } else {
            d["nodes_error"] = utf8(nodes.status().message());
          }
        }
      } else {
        d["error"] = utf8(bytes.status().message());
      }
    } else {
      d["location"] = "?";
    }
    Json specs = Json::array();
    if (const auto* compile_specs = delegate->compile_specs()) {
      for (const efb::CompileSpec* spec : *compile_specs) specs.push_back(str(spec->key()));
    }
    d["compile_specs"] = std::move(specs);
    d["calls"] = delegate_calls[i];
    delegates.push_back(std::move(d));
  }
  if (bad_delegate_calls > 0) delegates.push_back(Json{{"index", "?"}, {"id", "?"}, {"calls", bad_delegate_calls}});
  out["delegates"] = std::move(delegates);
  if (!other.empty()) out["other_instructions"] = other;

  Json buffers = Json::array();
  if (const auto* sizes = plan.non_const_buffer_sizes()) {
    for (int64_t size : *sizes) buffers.push_back(size);
  }
  out["non_const_buffer_sizes"] = std::move(buffers);
  // What the planned tensors would take without sharing memory (each at its
  // upper-bound size), next to the arenas above: the planner's saving.
  uint64_t unshared = 0;
  if (const auto* values = plan.values()) {
    for (const efb::EValue* v : *values) {
      const efb::Tensor* t = v != nullptr ? v->val_as_Tensor() : nullptr;
      uint64_t numel = 0, nbytes = 0;
      if (t != nullptr && t->allocation_info() != nullptr && tensor_nbytes(*t, &numel, &nbytes)) unshared += nbytes;
    }
  }
  out["planned_tensor_bytes_without_reuse"] = unshared;
  // Named mutable buffers (KV caches): planned, or left to the caller by
  // alloc_mutable_buffers=false (no allocation_info, no initial value).
  Json mutable_buffers = Json::array();
  if (const auto* values = plan.values()) {
    auto is_io = [](const flatbuffers::Vector<int32_t>* list, int64_t v) {
      return list != nullptr && std::find(list->begin(), list->end(), int32_t(v)) != list->end();
    };
    for (uint32_t v = 0; v < values->size(); ++v) {
      const efb::EValue* ev = values->Get(v);
      const efb::Tensor* t = ev != nullptr ? ev->val_as_Tensor() : nullptr;
      if (t == nullptr || t->extra_tensor_info() == nullptr) continue;
      const auto* fqn = t->extra_tensor_info()->fully_qualified_name();
      if (fqn == nullptr || fqn->size() == 0 || int(t->extra_tensor_info()->location()) != 0) continue;
      if ((t->data_buffer_idx() > 0 && t->allocation_info() == nullptr) || is_io(plan.inputs(), v) ||
          is_io(plan.outputs(), v)) {
        continue;  // a constant or an input/output, not a mutable buffer
      }
      Json b = tensor_json(*t);
      b.erase("type");
      b.erase("dynamism");
      b["value"] = v;
      b["name"] = str(fqn);
      b["planned"] = t->allocation_info() != nullptr;
      b["data"] = t->allocation_info() != nullptr ? b["data"] : Json("unplanned");
      uint64_t numel = 0, nbytes = 0;
      if (tensor_nbytes(*t, &numel, &nbytes)) b["nbytes"] = nbytes;
      mutable_buffers.push_back(std::move(b));
    }
  }
  out["mutable_buffers"] = std::move(mutable_buffers);

  Json constant = constant_json(file, plan, instructions);
  if (!constant.is_null()) out["constant"] = std::move(constant);
  return out;
}

// ---------------------------------------------------------------------------
// Text rendering, from the JSON so both views always agree.

std::string scalar_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string sizes_text(const Json& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += sizes[i].dump();
  }
  return out + "]";
}

std::string value_text(const Json& v) {
  std::string out = fmt::format("#{} ", v["value"].dump());
  const std::string type = v["type"].get<std::string>();
  if (type == "tensor") {
    return out + fmt::format("{}{} {} ({})", v["dtype"].get<std::string>(), sizes_text(v["sizes"]),
                             v["dynamism"].get<std::string>(), v["data"].get<std::string>());
  }
  out += type;
  for (const char* key : {"value_int", "value_bool", "value_double"}) {
    if (v.contains(key)) out += " " + v[key].dump();
  }
  if (v.contains("value_string")) out += " " + v["value_string"].dump();
  if (v.contains("length")) out += fmt::format(" (length {})", v["length"].dump());
  return out;
}

std::string values_text(const Json& list) {
  if (list.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ", ";
    out += value_text(list[i]);
  }
  return out;
}

std::string constant_text(const Json& c) {
  const std::string type = c["type"].get<std::string>();
  if (type != "tensor") return type + " " + (type == "string" ? c["value"].dump() : scalar_text(c["value"]));
  std::string out = fmt::format("{}{}", c["dtype"].get<std::string>(), sizes_text(c["sizes"]));
  if (c.contains("error")) return out + " ? (" + c["error"].get<std::string>() + ")";
  out += " [";
  const Json& values = c["values"];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += values[i].dump();
  }
  if (c.contains("truncated")) out += ", ...";
  return out + "]";
}

void method_text(const Json& m, std::string& out) {
  out += fmt::format("  {}\n", m["name"].get<std::string>());
  out += fmt::format("    inputs:  {}\n", values_text(m["inputs"]));
  out += fmt::format("    outputs: {}\n", values_text(m["outputs"]));
  out += fmt::format("    values: {}, chains: {}, instructions: {}\n", m["values"].dump(), m["chains"].dump(),
                     m["instructions"].dump());
  if (m["operators"].empty()) {
    out += "    operators: none\n";
  } else {
    out += "    operators:\n";
    for (const Json& op : m["operators"]) {
      out += fmt::format("      {} x{}\n", op["name"].get<std::string>(), op["instructions"].dump());
    }
  }
  if (m["delegates"].empty()) {
    out += "    delegates: none\n";
  } else {
    out += "    delegates:\n";
    for (const Json& d : m["delegates"]) {
      std::string data;
      if (d.contains("data_index")) {
        data = fmt::format(", {} {}", d["location"].get<std::string>(), d["data_index"].dump());
        data += d.contains("size") ? fmt::format(", {} bytes", d["size"].dump())
                                   : fmt::format(", ? bytes ({})", d["error"].get<std::string>());
      }
      std::string nodes;
      if (d.contains("nodes")) {
        std::vector<std::string> parts;
        for (const Json& n : d["nodes"]) parts.push_back(fmt::format("{} x{}", n["type"].get<std::string>(), n["count"].dump()));
        nodes = fmt::format(", {} nodes ({})", d["node_count"].dump(), fmt::join(parts, ", "));
      } else if (d.contains("nodes_error")) {
        nodes = fmt::format(", nodes: ? ({})", d["nodes_error"].get<std::string>());
      }
      out += fmt::format("      [{}] {}{}, calls {}{}\n", scalar_text(d["index"]), d["id"].get<std::string>(), data,
                         d["calls"].dump(), nodes);
    }
  }
  if (m.contains("other_instructions")) {
    std::string other;
    for (const auto& [kind, n] : m["other_instructions"].items()) {
      other += fmt::format("{}{} {}", other.empty() ? "" : ", ", kind, n.dump());
    }
    out += fmt::format("    other instructions: {}\n", other);
  }
  // Entry 0 is the reserved constant buffer; entry i is the arena for memory_id i.
  const Json& buffers = m["non_const_buffer_sizes"];
  std::string arenas;
  for (size_t i = 1; i < buffers.size(); ++i) {
    arenas += fmt::format("{}[{}] {} bytes", arenas.empty() ? "" : ", ", i, buffers[i].dump());
  }
  out += fmt::format("    memory planned buffers: {}", arenas.empty() ? "none" : arenas);
  if (m.contains("planned_tensor_bytes_without_reuse")) {
    out += fmt::format(" (planned tensors without reuse: {} bytes)", m["planned_tensor_bytes_without_reuse"].dump());
  }
  out += "\n";
  if (m.contains("mutable_buffers") && !m["mutable_buffers"].empty()) {
    const Json& list = m["mutable_buffers"];
    size_t unplanned = 0;
    uint64_t unplanned_bytes = 0;
    for (const Json& b : list) {
      if (b["planned"].get<bool>()) continue;
      ++unplanned;
      if (b.contains("nbytes")) unplanned_bytes += b["nbytes"].get<uint64_t>();
    }
    if (unplanned == 0) {
      out += fmt::format("    mutable buffers: {}, all planned\n", list.size());
    } else {
      out += fmt::format("    mutable buffers: {} ({} planned, {} unplanned: the caller supplies {} bytes)\n",
                         list.size(), list.size() - unplanned, unplanned, unplanned_bytes);
    }
    for (const Json& b : list) {
      out += fmt::format("      {} #{} {}{} ({})\n", b["name"].get<std::string>(), b["value"].dump(),
                         b["dtype"].get<std::string>(), sizes_text(b["sizes"]), b["data"].get<std::string>());
    }
  }
}

}  // namespace

Json inspect_json(const PteFile& file, const InspectOptions& options) {
  const efb::Program& program = file.program();
  Json out;
  out["file"] = utf8(file.path());
  out["file_size"] = file.file_bytes().size();

  const ExtendedHeader& header = file.header();
  Json h;
  h["present"] = header.present;
  if (header.present) {
    h["length"] = header.length;
    h["program_size"] = header.program_size;
    h["segment_base_offset"] = header.segment_base_offset;
    h["segment_data_size"] = header.segment_data_size;
  }
  out["header"] = std::move(h);
  out["version"] = program.version();

  Json segments = Json::array();
  for (uint32_t i = 0; i < count(program.segments()); ++i) {
    const efb::DataSegment* segment = program.segments()->Get(i);
    Json s{{"index", i}, {"offset", segment->offset()}, {"size", segment->size()}};
    if (auto bytes = file.segment(i); !bytes) s["error"] = utf8(bytes.status().message());
    segments.push_back(std::move(s));
  }
  out["segments"] = std::move(segments);

  // offsets[0] is the reserved placeholder, so a segment holds size-1 entries.
  auto entries = [](const efb::SubsegmentOffsets* s) {
    const uint32_t n = count(s->offsets());
    return n > 0 ? n - 1 : 0;
  };
  if (const efb::SubsegmentOffsets* constants = program.constant_segment()) {
    out["constant_segment"] = Json{{"segment_index", constants->segment_index()}, {"constants", entries(constants)}};
  } else {
    out["constant_segment"] = nullptr;
  }
  Json mutable_segments = Json::array();
  if (const auto* list = program.mutable_data_segments()) {
    for (const efb::SubsegmentOffsets* s : *list) {
      mutable_segments.push_back(Json{{"segment_index", s->segment_index()}, {"entries", entries(s)}});
    }
  }
  out["mutable_data_segments"] = std::move(mutable_segments);
  out["legacy_constant_buffers"] = count(program.constant_buffer());
  Json inline_data = Json::array();
  if (const auto* list = program.backend_delegate_data()) {
    for (const efb::BackendDelegateInlineData* d : *list) inline_data.push_back(count(d->data()));
  }
  out["inline_delegate_data"] = std::move(inline_data);

  Json methods = Json::array();
  if (const auto* plans = program.execution_plan()) {
    for (const efb::ExecutionPlan* plan : *plans) methods.push_back(method_json(file, *plan, options));
  }
  out["methods"] = std::move(methods);

  Json named = Json::array();
  if (const auto* list = program.named_data()) {
    for (const efb::NamedData* entry : *list) {
      Json n{{"key", str(entry->key())}, {"segment_index", entry->segment_index()}};
      if (auto bytes = file.segment(entry->segment_index())) {
        n["size"] = bytes->size();
      } else {
        n["error"] = utf8(bytes.status().message());
      }
      named.push_back(std::move(n));
    }
  }
  out["named_data"] = std::move(named);
  return out;
}

std::string inspect_text(const PteFile& file, const InspectOptions& options) {
  const Json j = inspect_json(file, options);
  std::string out;
  out += fmt::format("file: {} ({} bytes)\n", j["file"].get<std::string>(), j["file_size"].dump());
  const Json& h = j["header"];
  if (h["present"].get<bool>()) {
    out += fmt::format("header: eh00, length {}, program_size {}, segment_base_offset {}, segment_data_size {}\n",
                       h["length"].dump(), h["program_size"].dump(), h["segment_base_offset"].dump(),
                       h["segment_data_size"].dump());
  } else {
    out += "header: none (no segment data)\n";
  }
  out += fmt::format("program version: {}\n", j["version"].dump());

  out += fmt::format("segments: {}\n", j["segments"].size());
  for (const Json& s : j["segments"]) {
    out += fmt::format("  [{}] offset {}, size {}{}\n", s["index"].dump(), s["offset"].dump(), s["size"].dump(),
                       s.contains("error") ? " ? (" + s["error"].get<std::string>() + ")" : "");
  }
  if (j["constant_segment"].is_null()) {
    out += "constant segment: none\n";
  } else {
    out += fmt::format("constant segment: segment {}, {} constants\n",
                       j["constant_segment"]["segment_index"].dump(), j["constant_segment"]["constants"].dump());
  }
  for (const Json& s : j["mutable_data_segments"]) {
    out += fmt::format("mutable data segment: segment {}, {} entries\n", s["segment_index"].dump(),
                       s["entries"].dump());
  }
  if (j["legacy_constant_buffers"].get<uint32_t>() > 0) {
    out += fmt::format("legacy constant buffers: {}\n", j["legacy_constant_buffers"].dump());
  }
  if (!j["inline_delegate_data"].empty()) {
    out += fmt::format("inline delegate data: {} bytes each\n", sizes_text(j["inline_delegate_data"]));
  }

  std::vector<const Json*> regular;
  std::vector<const Json*> constants;
  for (const Json& m : j["methods"]) (m.contains("constant") ? constants : regular).push_back(&m);
  out += fmt::format("methods: {}\n", regular.size());
  for (const Json* m : regular) method_text(*m, out);
  out += fmt::format("constant methods: {}\n", constants.size());
  for (const Json* m : constants) {
    out += fmt::format("  {} = {}\n", (*m)["name"].get<std::string>(), constant_text((*m)["constant"]));
  }
  // An LLM program exported with --no-kv-cache (and every encoder): said in words,
  // since generate then recomputes the whole sequence each step.
  for (const Json* m : constants) {
    const Json& c = (*m)["constant"];
    if ((*m)["name"] == "use_kv_cache" && c["type"] == "bool" && !c["value"].get<bool>()) {
      out += "KV cache: none (use_kv_cache = false): forward takes no cache_position and every call runs the "
             "whole sequence\n";
    }
  }

  out += fmt::format("named data: {}\n", j["named_data"].size());
  for (const Json& n : j["named_data"]) {
    out += fmt::format("  {}: segment {}, {}\n", n["key"].get<std::string>(), n["segment_index"].dump(),
                       n.contains("size") ? n["size"].dump() + " bytes" : "? (" + n["error"].get<std::string>() + ")");
  }
  return out;
}

}  // namespace hf2pte::pte
