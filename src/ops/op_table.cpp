#include "ops/op_table.h"

#include <array>
#include <cassert>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace hf2pte {

namespace {

constexpr std::array<OpInfo, size_t(OpId::kCount)> kOps = {{
#define HF2PTE_KERNEL_OP(id, name, overload, schema) {OpId::id, name, overload, schema, true},
#define HF2PTE_GRAPH_OP(id, name, overload, schema) {OpId::id, name, overload, schema, false},
#include "ops/ops.def"
#undef HF2PTE_KERNEL_OP
#undef HF2PTE_GRAPH_OP
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits on commas that are not inside brackets or parentheses.
std::vector<std::string_view> split_top_level(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  auto last = trim(s.substr(start));
  if (!last.empty()) parts.push_back(last);
  return parts;
}

std::optional<ArgType> parse_type(std::string_view t, bool* optional, bool* mutated) {
  // Strip alias annotation "(a!)" / "(a)".
  if (auto p = t.find('('); p != std::string_view::npos) {
    *mutated = t.find('!', p) != std::string_view::npos;
    auto q = t.find(')', p);
    std::string_view rest = q == std::string_view::npos ? std::string_view{} : t.substr(q + 1);
    t = std::string_view(t.data(), p);
    // Keep list / optional suffixes that follow the annotation ("Tensor(a!)[]" is not used).
    (void)rest;
  }
  *optional = false;
  bool list = false;
  bool optional_elem = false;
  if (t.size() >= 2 && t.substr(t.size() - 1) == "?") {
    *optional = true;
    t.remove_suffix(1);
  }
  if (auto b = t.find('['); b != std::string_view::npos) {
    list = true;
    t = t.substr(0, b);
  }
  if (!t.empty() && t.back() == '?') {
    optional_elem = true;
    t.remove_suffix(1);
  }
  if (t == "Tensor") {
    if (!list) return ArgType::kTensor;
    return optional_elem ? ArgType::kOptionalTensorList : ArgType::kTensorList;
  }
  if (t == "int" || t == "SymInt") return list ? ArgType::kIntList : ArgType::kInt;
  if (t == "float") return list ? ArgType::kFloatList : ArgType::kFloat;
  if (t == "bool") return list ? ArgType::kBoolList : ArgType::kBool;
  if (t == "Scalar") return ArgType::kScalar;
  if (t == "ScalarType") return ArgType::kScalarType;
  if (t == "MemoryFormat") return ArgType::kMemoryFormat;
  if (t == "str") return ArgType::kString;
  return std::nullopt;
}

}  // namespace

size_t OpSchema::num_outs() const {
  size_t n = 0;
  for (const auto& a : args) n += a.is_out ? 1 : 0;
  return n;
}

std::string OpInfo::kernel_key() const {
  std::string key(name);
  if (!overload.empty()) {
    key += '.';
    key += overload;
  }
  return key;
}

std::string OpInfo::short_name() const {
  auto n = name;
  if (auto p = n.find("::"); p != std::string_view::npos && n.substr(0, p) == "aten") n = n.substr(p + 2);
  std::string s(n);
  if (!overload.empty()) s += "." + std::string(overload);
  return s;
}

std::optional<OpSchema> parse_schema(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.front() != '(') return std::nullopt;
  auto close = text.find(") ->");
  if (close == std::string_view::npos) return std::nullopt;
  OpSchema schema;
  bool kwarg_only = false;
  for (auto part : split_top_level(text.substr(1, close - 1))) {
    if (part == "*") {
      kwarg_only = true;
      continue;
    }
    auto eq = part.find('=');
    std::string_view decl = trim(eq == std::string_view::npos ? part : part.substr(0, eq));
    auto sp = decl.rfind(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    ArgSchema arg;
    arg.name = std::string(trim(decl.substr(sp + 1)));
    auto type = parse_type(trim(decl.substr(0, sp)), &arg.optional, &arg.mutated);
    if (!type) return std::nullopt;
    arg.type = *type;
    arg.kwarg_only = kwarg_only;
    arg.is_out = kwarg_only && arg.mutated;
    if (eq != std::string_view::npos) arg.default_value = std::string(trim(part.substr(eq + 1)));
    schema.args.push_back(std::move(arg));
  }
  auto ret = trim(text.substr(close + 4));
  if (!ret.empty() && ret.front() == '(') ret = ret.substr(1, ret.size() - 2);
  for (auto r : split_top_level(ret)) schema.returns.emplace_back(r);
  return schema;
}

std::span<const OpInfo> all_ops() { return kOps; }

const OpInfo& op_info(OpId id) {
  assert(int(id) >= 0 && id < OpId::kCount);
  return kOps[size_t(id)];
}

const OpSchema& op_schema(OpId id) {
  static std::once_flag once;
  static std::vector<OpSchema> schemas;
  std::call_once(once, [] {
    for (const auto& op : kOps) {
      auto s = parse_schema(op.schema_text);
      if (!s) {  // programmer error in ops.def: caught by ops_test on every build
        std::fprintf(stderr, "hf2pte: internal error: bad schema in ops.def for %s\n",
                     op.kernel_key().c_str());
        std::abort();
      }
      schemas.push_back(std::move(*s));
    }
  });
  return schemas[size_t(id)];
}

std::optional<OpId> find_op(std::string_view kernel_key) {
  for (const auto& op : kOps) {
    if (op.kernel_key() == kernel_key) return op.id;
  }
  return std::nullopt;
}

}  // namespace hf2pte
