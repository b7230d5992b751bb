// A small Jinja interpreter for chat templates. The template is cut into text
// and tags (applying trim_blocks / lstrip_blocks and `-` / `+` whitespace
// control, as transformers' apply_chat_template configures Jinja); tags are
// parsed into a statement tree and expressions into an AST, then evaluated
// over dynamically typed values. Unknown constructs fail at parse or
// evaluation time with a kNotSupported error naming them.
#include "llm/tokenizer/chat_template.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "llm/tokenizer/unicode.h"

namespace hf2pte::llm {
namespace {

using tok::utf8_decode;
using tok::utf8_encode;

// ---------------------------------------------------------------- values

struct Value;
using List = std::vector<Value>;
struct Dict {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, as Python dicts
  bool is_namespace = false;
  Value* find(const std::string& k);
  void set(const std::string& k, Value v);
};

struct Value {
  enum Kind { kUndefined, kNone, kBool, kInt, kStr, kList, kDict } kind = kUndefined;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;

  static Value none() { Value x; x.kind = kNone; return x; }
  static Value str(std::string v) { Value x; x.kind = kStr; x.s = std::move(v); return x; }
  static Value boolean(bool v) { Value x; x.kind = kBool; x.b = v; return x; }
  static Value integer(int64_t v) { Value x; x.kind = kInt; x.i = v; return x; }
  static Value new_list(List l = {}) { Value x; x.kind = kList; x.list = std::make_shared<List>(std::move(l)); return x; }
  static Value new_dict() { Value x; x.kind = kDict; x.dict = std::make_shared<Dict>(); return x; }

  bool truthy() const {
    switch (kind) {
      case kBool: return b;
      case kInt: return i != 0;
      case kStr: return !s.empty();
      case kList: return !list->empty();
      case kDict: return !dict->items.empty();
      default: return false;
    }
  }
};

Value* Dict::find(const std::string& k) {
  for (auto& [key, v] : items) if (key == k) return &v;
  return nullptr;
}
void Dict::set(const std::string& k, Value v) {
  if (Value* p = find(k)) *p = std::move(v);
  else items.emplace_back(k, std::move(v));
}

const char* kind_name(const Value& v) {
  static const char* names[] = {"undefined", "none", "boolean", "integer", "string", "list", "mapping"};
  return names[v.kind];
}

std::string repr(const Value& v);

// Python str(): what {{ }} prints.
std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::kStr: return v.s;
    case Value::kInt: return std::to_string(v.i);
    case Value::kBool: return v.b ? "True" : "False";
    case Value::kNone: return "None";
    case Value::kUndefined: return "";
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  if (v.kind == Value::kStr) {
    char q = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : v.s) {
      if (c == q || c == '\\') out += '\\';
      if (c == '\n') { out += "\\n"; continue; }
      out += c;
    }
    return out + q;
  }
  if (v.kind == Value::kList) {
    std::string out = "[";
    for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
    return out + "]";
  }
  if (v.kind == Value::kDict) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, x] : v.dict->items) {
      out += (first ? "'" : ", '") + key + "': " + repr(x);
      first = false;
    }
    return out + "}";
  }
  return to_str(v);
}

bool equal(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::kStr: return a.s == b.s;
    case Value::kInt: return a.i == b.i;
    case Value::kBool: return a.b == b.b;
    case Value::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::kDict: return a.dict == b.dict;
    default: return true;
  }
}

Value from_json(const nlohmann::ordered_json& j) {
  if (j.is_null()) return Value::none();
  if (j.is_boolean()) return Value::boolean(j.get<bool>());
  if (j.is_number_integer()) return Value::integer(j.get<int64_t>());
  if (j.is_number()) return Value::str(j.dump());  // floats: kept as their JSON text
  if (j.is_string()) return Value::str(j.get<std::string>());
  if (j.is_array()) {
    Value v = Value::new_list();
    for (const auto& x : j) v.list->push_back(from_json(x));
    return v;
  }
  Value v = Value::new_dict();
  for (const auto& [k, x] : j.items()) v.dict->set(k, from_json(x));
  return v;
}

// Python json.dumps(ensure_ascii=False), as transformers' tojson filter calls it.
void to_json(const Value& v, std::optional<int> indent, int level, std::string& out) {
  auto newline = [&](int lvl) {
    if (indent) out += "\n" + std::string(static_cast<size_t>(*indent * lvl), ' ');
  };
  switch (v.kind) {
    case Value::kStr:
      out += '"';
      for (unsigned char c : v.s) {
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\r': out += "\\r"; break;
          case '\t': out += "\\t"; break;
          case '\b': out += "\\b"; break;
          case '\f': out += "\\f"; break;
          default:
            if (c < 0x20) out += fmt::format("\\u{:04x}", c);
            else out += static_cast<char>(c);
        }
      }
      out += '"';
      break;
    case Value::kInt: out += std::to_string(v.i); break;
    case Value::kBool: out += v.b ? "true" : "false"; break;
    case Value::kList:
      if (v.list->empty()) { out += "[]"; break; }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += indent ? "," : ", ";
        newline(level + 1);
        to_json((*v.list)[k], indent, level + 1, out);
      }
      newline(level);
      out += ']';
      break;
    case Value::kDict: {
      if (v.dict->items.empty()) { out += "{}"; break; }
      out += '{';
      bool first = true;
      for (const auto& [key, x] : v.dict->items) {
        if (!first) out += indent ? "," : ", ";
        first = false;
        newline(level + 1);
        to_json(Value::str(key), indent, level + 1, out);
        out += ": ";
        to_json(x, indent, level + 1, out);
      }
      newline(level);
      out += '}';
      break;
    }
    default: out += "null";
  }
}

Status unsupported(const std::string& what) {
  return make_error(ErrorCode::kNotSupported, "chat template: {} is not supported (tokenizer_config.json)", what);
}
Status template_error(const std::string& what) {
  return make_error(ErrorCode::kInvalidInput, "chat template: {} (tokenizer_config.json)", what);
}

// ---------------------------------------------------------------- lexer

struct Tok {
  enum K { kName, kStr, kInt, kOp, kEnd } k;
  std::string v;
};

// Where a piece of template source starts (1-based), so errors can point into the template.
struct Loc {
  size_t line = 1, col = 1;
};

// The location of byte `off` of `e`, a piece of source that starts at `start`.
Loc advance(Loc start, std::string_view e, size_t off) {
  for (size_t k = 0; k < off && k < e.size(); ++k) {
    if (e[k] == '\n') { ++start.line; start.col = 1; }
    else ++start.col;
  }
  return start;
}

Status escape_error(const std::string& what, Loc at) {
  return template_error(fmt::format("{} in a string literal at line {}, column {}", what, at.line, at.col));
}

// Reads exactly `n` hex digits at e[j...]; nullopt when there are fewer.
std::optional<char32_t> hex_digits(std::string_view e, size_t j, size_t n) {
  if (j + n > e.size()) return std::nullopt;
  char32_t v = 0;
  for (size_t k = j; k < j + n; ++k) {
    if (!std::isxdigit(static_cast<unsigned char>(e[k]))) return std::nullopt;
    v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(e[k])) ? e[k] - '0' : (e[k] | 0x20) - 'a' + 10);
  }
  return v;
}

// One backslash escape of a string literal, at e[j] == '\\'. Jinja decodes literals with
// Python's unicode-escape codec: \\ \' \" \a \b \f \n \r \t \v, \<newline> (dropped),
// octal \ooo, \xhh, \uXXXX, \UXXXXXXXX; any other escape is kept as written (backslash
// included). Unlike Python, a \uD800-\uDBFF \uDC00-\uDFFF pair is one code point and a
// lone surrogate is an error: UTF-8 cannot hold surrogates. Appends to `s`; returns the
// index of the escape's last byte.
Result<size_t> read_escape(std::string_view e, size_t j, Loc start, std::string& s) {
  const Loc at = advance(start, e, j);
  if (j + 1 >= e.size()) return escape_error("a backslash at the end", at);
  const char n = e[j + 1];
  static const std::pair<char, char> simple[] = {{'\\', '\\'}, {'\'', '\''}, {'"', '"'}, {'a', '\a'}, {'b', '\b'},
                                                {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}, {'v', '\v'}};
  for (const auto& [esc, c] : simple) {
    if (n == esc) { s += c; return j + 1; }
  }
  if (n == '\n') return j + 1;  // line continuation
  if (n >= '0' && n <= '7') {
    size_t k = j + 1;
    char32_t v = 0;
    while (k < e.size() && k < j + 4 && e[k] >= '0' && e[k] <= '7') v = v * 8 + static_cast<char32_t>(e[k++] - '0');
    s += utf8_encode({v});
    return k - 1;
  }
  const size_t digits = n == 'x' ? 2 : n == 'u' ? 4 : n == 'U' ? 8 : 0;
  if (digits == 0) {
    if (n == 'N') return unsupported(fmt::format("\\N{{...}} escape (line {}, column {})", at.line, at.col));
    s += '\\';  // unknown escape: kept as written
    s += n;
    return j + 1;
  }
  auto v = hex_digits(e, j + 2, digits);
  if (!v) return escape_error(fmt::format("truncated \\{} escape (needs {} hex digits)", n, digits), at);
  size_t last = j + 1 + digits;
  if (*v >= 0xD800 && *v <= 0xDBFF && n == 'u') {  // high surrogate: needs a low one next
    auto lo = last + 2 < e.size() && e[last + 1] == '\\' && e[last + 2] == 'u' ? hex_digits(e, last + 3, 4) : std::nullopt;
    if (!lo || *lo < 0xDC00 || *lo > 0xDFFF) {
      return escape_error(fmt::format("high surrogate \\u{:04X} without a low surrogate after it", static_cast<uint32_t>(*v)), at);
    }
    *v = 0x10000 + ((*v - 0xD800) << 10) + (*lo - 0xDC00);
    last += 6;
  } else if (*v >= 0xD800 && *v <= 0xDFFF) {
    return escape_error(fmt::format("lone surrogate \\{}{:0{}X}", n, static_cast<uint32_t>(*v), digits), at);
  } else if (*v > 0x10FFFF) {
    return escape_error(fmt::format("\\U{:08X} is beyond U+10FFFF", static_cast<uint32_t>(*v)), at);
  }
  s += utf8_encode({*v});
  return last;
}

Result<std::vector<Tok>> lex(std::string_view e, Loc start = {}) {
  std::vector<Tok> out;
  for (size_t i = 0; i < e.size();) {
    char c = e[i];
    auto uc = static_cast<unsigned char>(c);
    if (std::isspace(uc)) { ++i; continue; }
    if (std::isalpha(uc) || c == '_') {
      size_t j = i;
      while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '_')) ++j;
      out.push_back({Tok::kName, std::string(e.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(uc)) {
      size_t j = i;
      while (j < e.size() && std::isdigit(static_cast<unsigned char>(e[j]))) ++j;
      if (j + 1 < e.size() && e[j] == '.' && std::isdigit(static_cast<unsigned char>(e[j + 1]))) {
        return unsupported("float literal");
      }
      out.push_back({Tok::kInt, std::string(e.substr(i, j - i))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t j = i + 1;
      for (; j < e.size() && e[j] != c; ++j) {
        if (e[j] == '\\') {
          HF2PTE_ASSIGN_OR_RETURN(j, read_escape(e, j, start, s));
        } else {
          s += e[j];
        }
      }
      if (j >= e.size()) return template_error("unterminated string");
      out.push_back({Tok::kStr, s});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (const char* t : two) if (e.substr(i, 2) == t) op = t;
      if (op == "**") return unsupported("operator '**'");
      if (std::string_view("+-*/%~<>()[]{},:.|=!").find(c) == std::string_view::npos) {
        return unsupported(fmt::format("character '{}' in an expression", c));
      }
      out.push_back({Tok::kOp, op});
      i += op.size();
    }
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

// ---------------------------------------------------------------- expressions

struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum K { kLit, kName, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kNot, kNeg, kBin, kAnd, kOr, kCond, kList, kDict } k;
  Value lit;
  std::string name;                                    // name, attribute, filter, test, operator
  std::vector<ExprP> args;                             // operands / positional arguments (null = omitted)
  std::vector<std::pair<std::string, ExprP>> kwargs;   // keyword arguments
  bool negate = false;                                 // `is not`, `not in`
};

ExprP node(Expr::K k, std::string name = {}, std::vector<ExprP> args = {}) {
  auto e = std::make_shared<Expr>();
  e->k = k;
  e->name = std::move(name);
  e->args = std::move(args);
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Tok> t) : t_(std::move(t)) {}

  Result<ExprP> expression() { return ternary(); }
  Result<ExprP> or_expression() { return or_expr(); }
  bool at_end() const { return t_[p_].k == Tok::kEnd; }
  bool accept(Tok::K k, const char* v) {
    if (is(k, v)) { ++p_; return true; }
    return false;
  }
  bool is(Tok::K k, const char* v) const { return t_[p_].k == k && t_[p_].v == v; }
  Result<std::string> name() {
    if (t_[p_].k != Tok::kName) return unsupported("token '" + t_[p_].v + "' where a name is expected");
    return t_[p_++].v;
  }
  Status expect_end(const std::string& where) {
    if (!at_end()) return unsupported("token '" + t_[p_].v + "' in " + where);
    return Status::ok();
  }

 private:
  // Nesting guard: a hostile template must not exhaust the stack through recursive descent.
  struct Depth {
    explicit Depth(int& d) : d_(d) { ++d_; }
    ~Depth() { --d_; }
    int& d_;
  };
  static constexpr int kMaxDepth = 256;
  Status too_deep() const { return unsupported("expression nested deeper than 256 levels"); }
  // Operators and postfix steps per expression (each makes the tree one level deeper).
  Status count_op() { return ++ops_ > 4096 ? unsupported("expression with more than 4096 operators") : Status::ok(); }

  Result<ExprP> ternary() {
    Depth guard(depth_);
    if (depth_ > kMaxDepth) return too_deep();
    HF2PTE_ASSIGN_OR_RETURN(ExprP a, or_expr());
    if (!accept(Tok::kName, "if")) return a;
    HF2PTE_ASSIGN_OR_RETURN(ExprP cond, or_expr());
    ExprP other = node(Expr::kLit);  // `a if c` without else: undefined
    if (accept(Tok::kName, "else")) {
      HF2PTE_ASSIGN_OR_RETURN(other, ternary());
    }
    return node(Expr::kCond, "", {cond, a, other});
  }
  Result<ExprP> or_expr() {
    HF2PTE_ASSIGN_OR_RETURN(ExprP a, and_expr());
    while (accept(Tok::kName, "or")) {
      HF2PTE_RETURN_IF_ERROR(count_op());
      HF2PTE_ASSIGN_OR_RETURN(ExprP b, and_expr());
      a = node(Expr::kOr, "", {a, b});
    }
    return a;
  }
  Result<ExprP> and_expr() {
    HF2PTE_ASSIGN_OR_RETURN(ExprP a, not_expr());
    while (accept(Tok::kName, "and")) {
      HF2PTE_RETURN_IF_ERROR(count_op());
      HF2PTE_ASSIGN_OR_RETURN(ExprP b, not_expr());
      a = node(Expr::kAnd, "", {a, b});
    }
    return a;
  }
  Result<ExprP> not_expr() {
    Depth guard(depth_);
    if (depth_ > kMaxDepth) return too_deep();
    if (accept(Tok::kName, "not")) {
      HF2PTE_ASSIGN_OR_RETURN(ExprP a, not_expr());
      return node(Expr::kNot, "", {a});
    }
    return compare();
  }
  Result<ExprP> compare() {
    HF2PTE_ASSIGN_OR_RETURN(ExprP a, binary(0));
    while (true) {
      std::string op;
      bool negate = false;
      if (t_[p_].k == Tok::kOp && (t_[p_].v == "==" || t_[p_].v == "!=" || t_[p_].v == "<" || t_[p_].v == ">" ||
                                   t_[p_].v == "<=" || t_[p_].v == ">=")) {
        op = t_[p_++].v;
      } else if (accept(Tok::kName, "in")) {
        op = "in";
      } else if (is(Tok::kName, "not") && t_[p_ + 1].k == Tok::kName && t_[p_ + 1].v == "in") {
        p_ += 2;
        op = "in";
        negate = true;
      } else {
        return a;
      }
      HF2PTE_RETURN_IF_ERROR(count_op());
      HF2PTE_ASSIGN_OR_RETURN(ExprP b, binary(0));
      a = node(Expr::kBin, op, {a, b});
      a->negate = negate;
    }
  }
  // Levels: 0 = + -, 1 = ~, 2 = * / // % (Jinja's math1, concat, math2).
  Result<ExprP> binary(int level) {
    static const std::vector<std::vector<std::string>> ops = {{"+", "-"}, {"~"}, {"*", "/", "//", "%"}};
    auto next = [&]() -> Result<ExprP> { return level + 1 < 3 ? binary(level + 1) : unary(); };
    HF2PTE_ASSIGN_OR_RETURN(ExprP a, next());
    while (t_[p_].k == Tok::kOp &&
           std::find(ops[level].begin(), ops[level].end(), t_[p_].v) != ops[level].end()) {
      std::string op = t_[p_++].v;
      HF2PTE_RETURN_IF_ERROR(count_op());
      HF2PTE_ASSIGN_OR_RETURN(ExprP b, next());
      a = node(Expr::kBin, op, {a, b});
    }
    return a;
  }
  Result<ExprP> unary() {
    Depth guard(depth_);
    if (depth_ > kMaxDepth) return too_deep();
    if (accept(Tok::kOp, "-")) {
      HF2PTE_ASSIGN_OR_RETURN(ExprP a, unary());
      return node(Expr::kNeg, "", {a});
    }
    if (accept(Tok::kOp, "+")) return unary();
    HF2PTE_ASSIGN_OR_RETURN(ExprP a, primary());
    return postfix(a);
  }
  // Appends call arguments to e.args (after the receiver, when there is one) and e.kwargs.
  Status call_args(Expr& e) {
    const size_t first = e.args.size();
    while (!accept(Tok::kOp, ")")) {
      if (e.args.size() > first || !e.kwargs.empty()) {
        if (!accept(Tok::kOp, ",")) return unsupported("token '" + t_[p_].v + "' in an argument list");
        if (accept(Tok::kOp, ")")) break;
      }
      if (t_[p_].k == Tok::kName && t_[p_ + 1].k == Tok::kOp && t_[p_ + 1].v == "=") {
        std::string key = t_[p_].v;
        p_ += 2;
        HF2PTE_ASSIGN_OR_RETURN(ExprP v, expression());
        e.kwargs.emplace_back(key, v);
      } else {
        HF2PTE_ASSIGN_OR_RETURN(ExprP v, expression());
        e.args.push_back(v);
      }
    }
    return Status::ok();
  }
  Result<ExprP> postfix(ExprP a) {
    while (true) {
      HF2PTE_RETURN_IF_ERROR(count_op());
      if (accept(Tok::kOp, ".")) {
        HF2PTE_ASSIGN_OR_RETURN(std::string key, name());
        a = node(Expr::kAttr, key, {a});
      } else if (accept(Tok::kOp, "[")) {
        std::vector<ExprP> parts(1);
        bool slice = false;
        while (!accept(Tok::kOp, "]")) {
          if (accept(Tok::kOp, ":")) {
            slice = true;
            parts.emplace_back();
            if (parts.size() > 3) return unsupported("slice with more than 3 parts");
            continue;
          }
          if (parts.back()) return unsupported("token '" + t_[p_].v + "' in a subscript");
          HF2PTE_ASSIGN_OR_RETURN(parts.back(), expression());
        }
        if (!slice && !parts[0]) return unsupported("empty subscript");
        if (slice) {
          parts.resize(3);
          a = node(Expr::kSlice, "", {a, parts[0], parts[1], parts[2]});
        } else {
          a = node(Expr::kIndex, "", {a, parts[0]});
        }
      } else if (accept(Tok::kOp, "(")) {
        auto call = node(Expr::kCall, "", {a});
        HF2PTE_RETURN_IF_ERROR(call_args(*call));
        a = call;
      } else if (accept(Tok::kOp, "|")) {
        HF2PTE_ASSIGN_OR_RETURN(std::string f, name());
        auto e = node(Expr::kFilter, f, {a});
        if (accept(Tok::kOp, "(")) HF2PTE_RETURN_IF_ERROR(call_args(*e));
        a = e;
      } else if (accept(Tok::kName, "is")) {
        bool neg = accept(Tok::kName, "not");
        HF2PTE_ASSIGN_OR_RETURN(std::string test, name());
        auto e = node(Expr::kTest, test, {a});
        e->negate = neg;
        if (accept(Tok::kOp, "(")) HF2PTE_RETURN_IF_ERROR(call_args(*e));
        a = e;
      } else {
        return a;
      }
    }
  }
  Result<ExprP> primary() {
    Tok t = t_[p_];
    if (t.k == Tok::kEnd) return template_error("expression ends early");
    ++p_;
    if (t.k == Tok::kStr) {
      std::string s = t.v;
      while (t_[p_].k == Tok::kStr) s += t_[p_++].v;  // adjacent literals concatenate
      auto e = node(Expr::kLit);
      e->lit = Value::str(s);
      return e;
    }
    if (t.k == Tok::kInt) {
      auto e = node(Expr::kLit);
      if (t.v.size() > 18) return unsupported("integer literal " + t.v);
      e->lit = Value::integer(std::stoll(t.v));
      return e;
    }
    if (t.k == Tok::kName) {
      auto e = node(Expr::kLit);
      if (t.v == "true" || t.v == "True") { e->lit = Value::boolean(true); return e; }
      if (t.v == "false" || t.v == "False") { e->lit = Value::boolean(false); return e; }
      if (t.v == "none" || t.v == "None") { e->lit = Value::none(); return e; }
      return node(Expr::kName, t.v);
    }
    if (t.v == "(") {
      HF2PTE_ASSIGN_OR_RETURN(ExprP v, expression());
      if (is(Tok::kOp, ",")) return unsupported("tuple");
      if (!accept(Tok::kOp, ")")) return unsupported("token '" + t_[p_].v + "' where ')' is expected");
      return v;
    }
    if (t.v == "[") {
      auto e = node(Expr::kList);
      while (!accept(Tok::kOp, "]")) {
        if (!e->args.empty() && !accept(Tok::kOp, ",")) return unsupported("token '" + t_[p_].v + "' in a list");
        if (accept(Tok::kOp, "]")) break;
        HF2PTE_ASSIGN_OR_RETURN(ExprP v, expression());
        e->args.push_back(v);
      }
      return e;
    }
    if (t.v == "{") {
      auto e = node(Expr::kDict);
      while (!accept(Tok::kOp, "}")) {
        if (!e->args.empty() && !accept(Tok::kOp, ",")) return unsupported("token '" + t_[p_].v + "' in a dict");
        if (accept(Tok::kOp, "}")) break;
        HF2PTE_ASSIGN_OR_RETURN(ExprP k, expression());
        if (!accept(Tok::kOp, ":")) return unsupported("dict entry without ':'");
        HF2PTE_ASSIGN_OR_RETURN(ExprP v, expression());
        e->args.push_back(k);
        e->args.push_back(v);
      }
      return e;
    }
    return unsupported("token '" + t.v + "'");
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int ops_ = 0;
};

// ---------------------------------------------------------------- evaluation

struct Scope {
  std::map<std::string, Value> vars;
  Scope* parent = nullptr;
  const Value* find(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(n);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

std::vector<char32_t> chars(const Value& v) { return utf8_decode(v.s); }

bool is_py_space(char32_t c) { return c == ' ' || (c >= '\t' && c <= '\r') || tok::is_whitespace(c); }

std::string strip(const std::string& s, const Value* set, bool left, bool right) {
  std::vector<char32_t> cs = utf8_decode(s), strip_set;
  if (set && set->kind == Value::kStr) strip_set = utf8_decode(set->s);
  bool use_set = set && set->kind == Value::kStr;
  auto drop = [&](char32_t c) {
    return use_set ? std::find(strip_set.begin(), strip_set.end(), c) != strip_set.end() : is_py_space(c);
  };
  size_t b = 0, e = cs.size();
  if (left) while (b < e && drop(cs[b])) ++b;
  if (right) while (e > b && drop(cs[e - 1])) --e;
  return utf8_encode(std::vector<char32_t>(cs.begin() + static_cast<long>(b), cs.begin() + static_cast<long>(e)));
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Value out = Value::new_list();
  if (sep && sep->kind == Value::kStr) {
    size_t start = 0, pos;
    while ((maxsplit < 0 || static_cast<int64_t>(out.list->size()) < maxsplit) &&
           (pos = s.find(sep->s, start)) != std::string::npos) {
      out.list->push_back(Value::str(s.substr(start, pos - start)));
      start = pos + sep->s.size();
    }
    out.list->push_back(Value::str(s.substr(start)));
    return out;
  }
  std::vector<char32_t> cs = utf8_decode(s);  // whitespace split, empty pieces dropped
  size_t k = 0;
  while (k < cs.size()) {
    while (k < cs.size() && is_py_space(cs[k])) ++k;
    if (k == cs.size()) break;
    size_t b = k;
    if (maxsplit >= 0 && static_cast<int64_t>(out.list->size()) == maxsplit) {
      size_t e = cs.size();
      while (e > b && is_py_space(cs[e - 1])) --e;
      out.list->push_back(Value::str(utf8_encode({cs.begin() + static_cast<long>(b), cs.begin() + static_cast<long>(e)})));
      break;
    }
    while (k < cs.size() && !is_py_space(cs[k])) ++k;
    out.list->push_back(Value::str(utf8_encode({cs.begin() + static_cast<long>(b), cs.begin() + static_cast<long>(k)})));
  }
  return out;
}

std::string change_case(const std::string& s, int mode) {  // 0 upper, 1 lower, 2 capitalize, 3 title (ASCII)
  std::string out = s;
  bool word_start = true;
  for (size_t k = 0; k < out.size(); ++k) {
    auto c = static_cast<unsigned char>(out[k]);
    bool up = mode == 0 || (mode == 2 && k == 0) || (mode == 3 && word_start);
    out[k] = static_cast<char>(up ? std::toupper(c) : std::tolower(c));
    word_start = !std::isalnum(c);
  }
  return out;
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Value::kStr: return static_cast<int64_t>(chars(v).size());
    case Value::kList: return static_cast<int64_t>(v.list->size());
    case Value::kDict: return static_cast<int64_t>(v.dict->items.size());
    default: return 0;
  }
}

// Items a `for` iterates: list elements, string characters, mapping keys; undefined is empty.
Result<List> iterate(const Value& v) {
  switch (v.kind) {
    case Value::kList: return *v.list;
    case Value::kUndefined: case Value::kNone: return List{};
    case Value::kStr: {
      List out;
      for (char32_t c : chars(v)) out.push_back(Value::str(utf8_encode({c})));
      return out;
    }
    case Value::kDict: {
      List out;
      for (const auto& kv : v.dict->items) out.push_back(Value::str(kv.first));
      return out;
    }
    default: return unsupported(std::string("iterating over a ") + kind_name(v));
  }
}

Value items_of(const Value& d) {
  Value out = Value::new_list();
  for (const auto& [k, x] : d.dict->items) out.list->push_back(Value::new_list({Value::str(k), x}));
  return out;
}

class Evaluator {
 public:
  explicit Evaluator(Scope& scope) : scope_(scope) {}

  Result<Value> eval(const Expr& e) {
    // Left-deep chains (a + b + c ...) recurse once per operator: bound the stack use.
    if (depth_ > 512) return unsupported("expression nested deeper than 512 levels");
    ++depth_;
    auto r = eval_node(e);
    --depth_;
    return r;
  }

 private:
  Result<Value> eval_node(const Expr& e) {
    switch (e.k) {
      case Expr::kLit: return e.lit;
      case Expr::kName: {
        const Value* v = scope_.find(e.name);
        return v ? *v : Value{};
      }
      case Expr::kList: {
        Value out = Value::new_list();
        for (const auto& a : e.args) { HF2PTE_ASSIGN_OR_RETURN(Value v, eval(*a)); out.list->push_back(v); }
        return out;
      }
      case Expr::kDict: {
        Value out = Value::new_dict();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          HF2PTE_ASSIGN_OR_RETURN(Value key, eval(*e.args[k]));
          HF2PTE_ASSIGN_OR_RETURN(Value v, eval(*e.args[k + 1]));
          if (key.kind != Value::kStr) return unsupported("non-string dict key");
          out.dict->set(key.s, v);
        }
        return out;
      }
      case Expr::kAttr: {
        HF2PTE_ASSIGN_OR_RETURN(Value o, eval(*e.args[0]));
        return member(o, e.name);
      }
      case Expr::kIndex: {
        HF2PTE_ASSIGN_OR_RETURN(Value o, eval(*e.args[0]));
        HF2PTE_ASSIGN_OR_RETURN(Value k, eval(*e.args[1]));
        return index(o, k);
      }
      case Expr::kSlice: return slice(e);
      case Expr::kCall: return call(e);
      case Expr::kFilter: return filter(e);
      case Expr::kTest: return test(e);
      case Expr::kNot: {
        HF2PTE_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
        return Value::boolean(!a.truthy());
      }
      case Expr::kNeg: {
        HF2PTE_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
        if (a.kind != Value::kInt) return unsupported(std::string("unary '-' on a ") + kind_name(a));
        return Value::integer(-a.i);
      }
      case Expr::kAnd: case Expr::kOr: {  // short-circuit, returning the deciding operand as Python does
        HF2PTE_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
        if (a.truthy() == (e.k == Expr::kOr)) return a;
        return eval(*e.args[1]);
      }
      case Expr::kCond: {
        HF2PTE_ASSIGN_OR_RETURN(Value c, eval(*e.args[0]));
        return eval(*e.args[c.truthy() ? 1 : 2]);
      }
      case Expr::kBin: return binary(e);
    }
    return unsupported("expression");
  }

  Result<Value> arg(const Expr& e, size_t k, const char* kw) {
    for (const auto& [name, x] : e.kwargs) if (kw && name == kw) return eval(*x);
    if (k + 1 < e.args.size()) return eval(*e.args[k + 1]);  // args[0] is the receiver
    return Value{};
  }

  Result<Value> member(const Value& o, const std::string& key) {
    if (o.kind == Value::kDict) {
      Value* v = o.dict->find(key);
      return v ? *v : Value{};
    }
    return Value{};  // attributes of other values (and of undefined) are undefined
  }

  Result<Value> index(const Value& o, const Value& k) {
    if (o.kind == Value::kDict) {
      if (k.kind != Value::kStr) return Value{};
      return member(o, k.s);
    }
    if ((o.kind == Value::kList || o.kind == Value::kStr) && k.kind == Value::kInt) {
      List l = o.kind == Value::kList ? *o.list : *iterate(o);
      int64_t n = static_cast<int64_t>(l.size()), idx = k.i < 0 ? k.i + n : k.i;
      return idx >= 0 && idx < n ? l[static_cast<size_t>(idx)] : Value{};
    }
    return Value{};
  }

  Result<Value> slice(const Expr& e) {
    HF2PTE_ASSIGN_OR_RETURN(Value o, eval(*e.args[0]));
    int64_t bound[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.args[static_cast<size_t>(k) + 1]) continue;
      HF2PTE_ASSIGN_OR_RETURN(Value v, eval(*e.args[static_cast<size_t>(k) + 1]));
      if (v.kind == Value::kNone || v.kind == Value::kUndefined) continue;
      if (v.kind != Value::kInt) return unsupported(std::string("slice bound of type ") + kind_name(v));
      bound[k] = v.i;
      given[k] = true;
    }
    if (o.kind != Value::kList && o.kind != Value::kStr) return unsupported(std::string("slicing a ") + kind_name(o));
    HF2PTE_ASSIGN_OR_RETURN(List l, iterate(o));
    int64_t n = static_cast<int64_t>(l.size()), step = bound[2];
    if (step == 0) return template_error("slice step cannot be zero");
    // Python's slice.indices().
    auto fix = [&](int64_t v, bool g, int64_t def) {
      if (!g) return def;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    int64_t start = fix(bound[0], given[0], step > 0 ? 0 : n - 1);
    int64_t stop = fix(bound[1], given[1], step > 0 ? n : -1);
    List out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(l[static_cast<size_t>(k)]);
    if (o.kind == Value::kList) return Value::new_list(std::move(out));
    std::string s;
    for (const auto& c : out) s += c.s;
    return Value::str(s);
  }

  Result<Value> binary(const Expr& e) {
    HF2PTE_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
    HF2PTE_ASSIGN_OR_RETURN(Value b, eval(*e.args[1]));
    const std::string& op = e.name;
    if (op == "~") return Value::str(to_str(a) + to_str(b));
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in") {
      bool r = false;
      if (b.kind == Value::kStr && a.kind == Value::kStr) r = b.s.find(a.s) != std::string::npos;
      else if (b.kind == Value::kList) r = std::any_of(b.list->begin(), b.list->end(), [&](const Value& x) { return equal(x, a); });
      else if (b.kind == Value::kDict) r = a.kind == Value::kStr && b.dict->find(a.s) != nullptr;
      return Value::boolean(r != e.negate);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.kind == Value::kInt && b.kind == Value::kInt) c = a.i < b.i ? -1 : a.i > b.i;
      else if (a.kind == Value::kStr && b.kind == Value::kStr) c = a.s.compare(b.s) < 0 ? -1 : a.s.compare(b.s) > 0;
      else return unsupported(std::string("'") + op + "' between a " + kind_name(a) + " and a " + kind_name(b));
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+" && a.kind == Value::kStr && b.kind == Value::kStr) return Value::str(a.s + b.s);
    if (op == "+" && a.kind == Value::kList && b.kind == Value::kList) {
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::new_list(std::move(l));
    }
    if (a.kind == Value::kInt && b.kind == Value::kInt) {
      if ((op == "//" || op == "%") && b.i == 0) return template_error("integer division by zero");
      if (op == "+") return Value::integer(a.i + b.i);
      if (op == "-") return Value::integer(a.i - b.i);
      if (op == "*") return Value::integer(a.i * b.i);
      int64_t q = a.i / b.i, r = a.i % b.i;
      if (r != 0 && ((r < 0) != (b.i < 0))) { --q; r += b.i; }  // Python floors
      if (op == "//") return Value::integer(q);
      if (op == "%") return Value::integer(r);
    }
    if (op == "*" && a.kind == Value::kStr && b.kind == Value::kInt) {
      std::string s;
      for (int64_t k = 0; k < b.i && k < 100000; ++k) s += a.s;
      return Value::str(s);
    }
    return unsupported(std::string("'") + op + "' between a " + kind_name(a) + " and a " + kind_name(b));
  }

  Result<Value> call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.k == Expr::kName) {
      if (callee.name == "raise_exception") {
        HF2PTE_ASSIGN_OR_RETURN(Value msg, arg(e, 0, nullptr));
        return make_error(ErrorCode::kInvalidArgument, "chat template: {}", to_str(msg));
      }
      if (callee.name == "namespace") {
        Value ns = Value::new_dict();
        ns.dict->is_namespace = true;
        for (const auto& [k, x] : e.kwargs) {
          HF2PTE_ASSIGN_OR_RETURN(Value v, eval(*x));
          ns.dict->set(k, v);
        }
        return ns;
      }
      if (callee.name == "range") {
        HF2PTE_ASSIGN_OR_RETURN(Value a, arg(e, 0, nullptr));
        HF2PTE_ASSIGN_OR_RETURN(Value b, arg(e, 1, nullptr));
        int64_t lo = b.kind == Value::kInt ? a.i : 0, hi = b.kind == Value::kInt ? b.i : a.i;
        if (a.kind != Value::kInt) return unsupported("range() of a non-integer");
        Value out = Value::new_list();
        for (int64_t k = lo; k < hi && k - lo < 1000000; ++k) out.list->push_back(Value::integer(k));
        return out;
      }
      return unsupported("function '" + callee.name + "()'");
    }
    if (callee.k != Expr::kAttr) return unsupported("call of an expression");
    HF2PTE_ASSIGN_OR_RETURN(Value o, eval(*callee.args[0]));
    const std::string& m = callee.name;
    // Method arguments: shift by one because arg() skips args[0] (the callee).
    if (o.kind == Value::kStr) {
      HF2PTE_ASSIGN_OR_RETURN(Value a0, arg(e, 0, nullptr));
      if (m == "startswith" || m == "endswith") {
        if (a0.kind != Value::kStr) return unsupported("." + m + "() with a non-string argument");
        bool r = a0.s.size() <= o.s.size() &&
                 (m == "startswith" ? o.s.compare(0, a0.s.size(), a0.s) == 0
                                    : o.s.compare(o.s.size() - a0.s.size(), a0.s.size(), a0.s) == 0);
        return Value::boolean(r);
      }
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        return Value::str(strip(o.s, a0.kind == Value::kStr ? &a0 : nullptr, m != "rstrip", m != "lstrip"));
      }
      if (m == "split") {
        HF2PTE_ASSIGN_OR_RETURN(Value a1, arg(e, 1, "maxsplit"));
        if (a0.kind == Value::kStr && a0.s.empty()) return template_error("split() with an empty separator");
        return split(o.s, a0.kind == Value::kStr ? &a0 : nullptr, a1.kind == Value::kInt ? a1.i : -1);
      }
      if (m == "upper") return Value::str(change_case(o.s, 0));
      if (m == "lower") return Value::str(change_case(o.s, 1));
      if (m == "capitalize") return Value::str(change_case(o.s, 2));
      if (m == "title") return Value::str(change_case(o.s, 3));
      if (m == "replace") {
        HF2PTE_ASSIGN_OR_RETURN(Value a1, arg(e, 1, nullptr));
        if (a0.kind != Value::kStr || a1.kind != Value::kStr || a0.s.empty()) return unsupported(".replace() arguments");
        std::string out;
        size_t start = 0, pos;
        while ((pos = o.s.find(a0.s, start)) != std::string::npos) {
          out += o.s.substr(start, pos - start) + a1.s;
          start = pos + a0.s.size();
        }
        return Value::str(out + o.s.substr(start));
      }
    }
    if (o.kind == Value::kDict) {
      if (m == "get") {
        HF2PTE_ASSIGN_OR_RETURN(Value k, arg(e, 0, nullptr));
        HF2PTE_ASSIGN_OR_RETURN(Value def, arg(e, 1, nullptr));
        Value* v = k.kind == Value::kStr ? o.dict->find(k.s) : nullptr;
        return v ? *v : (def.kind == Value::kUndefined ? Value::none() : def);
      }
      if (m == "items") return items_of(o);
      if (m == "keys" || m == "values") {
        Value out = Value::new_list();
        for (const auto& [k, x] : o.dict->items) out.list->push_back(m == "keys" ? Value::str(k) : x);
        return out;
      }
    }
    return unsupported("method '." + m + "()' on a " + kind_name(o));
  }

  Result<Value> filter(const Expr& e) {
    HF2PTE_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
    const std::string& f = e.name;
    if (f == "trim") return Value::str(strip(to_str(a), nullptr, true, true));
    if (f == "length" || f == "count") return Value::integer(length(a));
    if (f == "upper") return Value::str(change_case(to_str(a), 0));
    if (f == "lower") return Value::str(change_case(to_str(a), 1));
    if (f == "capitalize") return Value::str(change_case(to_str(a), 2));
    if (f == "title") return Value::str(change_case(to_str(a), 3));
    if (f == "string") return Value::str(to_str(a));
    if (f == "tojson") {
      HF2PTE_ASSIGN_OR_RETURN(Value ind, arg(e, 0, "indent"));
      std::string out;
      to_json(a, ind.kind == Value::kInt ? std::optional<int>(static_cast<int>(ind.i)) : std::nullopt, 0, out);
      return Value::str(out);
    }
    if (f == "int") {
      if (a.kind == Value::kInt) return a;
      if (a.kind == Value::kBool) return Value::integer(a.b);
      try { return Value::integer(std::stoll(a.s)); } catch (...) { return Value::integer(0); }
    }
    if (f == "default" || f == "d") {
      HF2PTE_ASSIGN_OR_RETURN(Value def, arg(e, 0, "default_value"));
      HF2PTE_ASSIGN_OR_RETURN(Value boolean, arg(e, 1, "boolean"));
      bool use_default = a.kind == Value::kUndefined || (boolean.truthy() && !a.truthy());
      return use_default ? def : a;
    }
    if (f == "first" || f == "last" || f == "reverse" || f == "list") {
      HF2PTE_ASSIGN_OR_RETURN(List l, iterate(a));
      if (f == "first") return l.empty() ? Value{} : l.front();
      if (f == "last") return l.empty() ? Value{} : l.back();
      if (f == "reverse") {
        std::reverse(l.begin(), l.end());
        if (a.kind == Value::kStr) {
          std::string s;
          for (const auto& c : l) s += c.s;
          return Value::str(s);
        }
      }
      return Value::new_list(std::move(l));
    }
    if (f == "join") {
      HF2PTE_ASSIGN_OR_RETURN(Value sep, arg(e, 0, "d"));
      HF2PTE_ASSIGN_OR_RETURN(List l, iterate(a));
      std::string out;
      for (size_t k = 0; k < l.size(); ++k) out += (k ? to_str(sep) : "") + to_str(l[k]);
      return Value::str(out);
    }
    if (f == "items") {
      if (a.kind != Value::kDict) return unsupported(std::string("filter 'items' on a ") + kind_name(a));
      return items_of(a);
    }
    return unsupported("filter '" + f + "'");
  }

  Result<Value> test(const Expr& e) {
    HF2PTE_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
    const std::string& t = e.name;
    bool r;
    if (t == "defined") r = a.kind != Value::kUndefined;
    else if (t == "undefined") r = a.kind == Value::kUndefined;
    else if (t == "none") r = a.kind == Value::kNone;
    else if (t == "string") r = a.kind == Value::kStr;
    else if (t == "number" || t == "integer") r = a.kind == Value::kInt;
    else if (t == "boolean") r = a.kind == Value::kBool;
    else if (t == "true") r = a.kind == Value::kBool && a.b;
    else if (t == "false") r = a.kind == Value::kBool && !a.b;
    else if (t == "mapping") r = a.kind == Value::kDict;
    else if (t == "sequence" || t == "iterable") r = a.kind == Value::kList || a.kind == Value::kStr || a.kind == Value::kDict;
    else return unsupported("test 'is " + t + "'");
    return Value::boolean(r != e.negate);
  }

  Scope& scope_;
  int depth_ = 0;
};

// ---------------------------------------------------------------- template structure

struct Piece {
  enum K { kText, kOut, kTag } k;
  std::string s;
  Loc at = {};  // where s starts in the template (tags and outputs)
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Finds the end of a tag opened at `from`, skipping quoted strings.
size_t find_close(std::string_view t, size_t from, std::string_view close) {
  char quote = 0;
  for (size_t i = from; i + 1 < t.size(); ++i) {
    char c = t[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (t.substr(i, close.size()) == close) {
      return i;
    }
  }
  return std::string_view::npos;
}

// Cuts the template into text, {{ }} and {% %} pieces. Whitespace handling as
// Jinja with trim_blocks and lstrip_blocks: `-` strips all whitespace on that
// side; otherwise a block or comment tag drops the first newline after it and
// the blanks before it when only blanks precede it on its line (`+` opts out).
Result<std::vector<Piece>> split_template(std::string_view t) {
  std::vector<Piece> out;
  std::string text;
  size_t i = 0;
  bool strip_next = false, trim_newline = false;
  Loc loc;           // the location of byte `loc_off`; only moves forward
  size_t loc_off = 0;
  auto loc_of = [&](size_t off) {
    loc = advance(loc, t.substr(loc_off), off - loc_off);
    loc_off = off;
    return loc;
  };
  auto push_text = [&]() {
    if (!text.empty()) out.push_back({Piece::kText, text});
    text.clear();
  };
  while (i < t.size()) {
    size_t open = i;
    while (open + 1 < t.size() && !(t[open] == '{' && (t[open + 1] == '{' || t[open + 1] == '%' || t[open + 1] == '#'))) ++open;
    if (open + 1 >= t.size()) open = t.size();
    std::string chunk(t.substr(i, open - i));
    if (strip_next) {
      size_t k = chunk.find_first_not_of(" \t\n\r");
      chunk.erase(0, k == std::string::npos ? chunk.size() : k);
    } else if (trim_newline) {
      if (chunk.compare(0, 1, "\n") == 0) chunk.erase(0, 1);
      else if (chunk.compare(0, 2, "\r\n") == 0) chunk.erase(0, 2);
    }
    strip_next = trim_newline = false;
    if (open >= t.size()) {
      text += chunk;
      break;
    }
    char kind = t[open + 1];
    size_t body = open + 2;
    char left = body < t.size() ? t[body] : 0;
    if (left == '-' || left == '+') ++body;
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = kind == '#' ? t.find(close, body) : find_close(t, body, close);
    if (end == std::string_view::npos) return template_error(fmt::format("unclosed '{{{}' tag", kind));
    size_t inner_end = end;
    char right = inner_end > body ? t[inner_end - 1] : 0;
    if (right == '-' || right == '+') --inner_end;
    bool block = kind != '{';
    if (left == '-') {
      chunk.erase(chunk.find_last_not_of(" \t\n\r") + 1);
    } else if (block && left != '+') {
      // lstrip_blocks: only blanks between the line start (in the source) and the tag.
      size_t k = open;
      while (k > 0 && is_blank(t[k - 1])) --k;
      if (k == 0 || t[k - 1] == '\n') {
        while (!chunk.empty() && is_blank(chunk.back())) chunk.pop_back();
      }
    }
    text += chunk;
    if (right == '-') strip_next = true;
    else if (block && right != '+') trim_newline = true;
    if (kind != '#') {
      push_text();
      out.push_back({kind == '{' ? Piece::kOut : Piece::kTag, std::string(t.substr(body, inner_end - body)), loc_of(body)});
    }
    i = end + 2;
  }
  push_text();
  return out;
}

struct Node {
  enum K { kText, kOut, kIf, kFor, kSet, kBreak, kContinue } k = kText;
  std::string text;                     // text
  ExprP expr;                           // output / set value / for iterable
  ExprP cond;                           // for ... if cond
  std::vector<std::string> names;       // for variables; set: {name} or {namespace, attribute}
  std::vector<std::pair<ExprP, std::vector<Node>>> branches;  // if: (cond or null for else, body)
  std::vector<Node> body;
  std::vector<Node> else_body;          // for: rendered when no item was iterated
};

struct TagStart {
  std::string keyword;
  std::unique_ptr<Parser> rest;
};

Result<TagStart> open_tag(const Piece& p) {
  HF2PTE_ASSIGN_OR_RETURN(auto toks, lex(p.s, p.at));
  if (toks.front().k != Tok::kName) return unsupported("tag '{% " + p.s + " %}'");
  std::string kw = toks.front().v;
  toks.erase(toks.begin());
  return TagStart{kw, std::make_unique<Parser>(std::move(toks))};
}

Result<ExprP> parse_expr_text(const Piece& piece, const char* where) {
  HF2PTE_ASSIGN_OR_RETURN(auto toks, lex(piece.s, piece.at));
  Parser p(std::move(toks));
  HF2PTE_ASSIGN_OR_RETURN(ExprP e, p.expression());
  HF2PTE_RETURN_IF_ERROR(p.expect_end(where));
  return e;
}

// Parses pieces from `pos` until a tag whose keyword is in `stops`; returns that keyword ("" at the end).
Result<std::string> parse_block(const std::vector<Piece>& ps, size_t& pos, std::vector<Node>& out,
                                const std::vector<std::string>& stops, int depth = 0) {
  if (depth > 64) return unsupported("nesting deeper than 64 blocks");
  while (pos < ps.size()) {
    const Piece& p = ps[pos++];
    if (p.k == Piece::kText) { Node n; n.text = p.s; out.push_back(std::move(n)); continue; }
    if (p.k == Piece::kOut) {
      Node n;
      n.k = Node::kOut;
      HF2PTE_ASSIGN_OR_RETURN(n.expr, parse_expr_text(p, "{{ }}"));
      out.push_back(std::move(n));
      continue;
    }
    HF2PTE_ASSIGN_OR_RETURN(TagStart tag, open_tag(p));
    for (const auto& st : stops) if (tag.keyword == st) { --pos; return st; }
    Parser& rest = *tag.rest;
    Node n;
    if (tag.keyword == "if") {
      n.k = Node::kIf;
      HF2PTE_ASSIGN_OR_RETURN(ExprP cond, rest.expression());
      HF2PTE_RETURN_IF_ERROR(rest.expect_end("{% if %}"));
      while (true) {
        std::vector<Node> body;
        HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(ps, pos, body, {"elif", "else", "endif"}, depth + 1));
        if (stop.empty()) return template_error("missing {% endif %}");
        n.branches.emplace_back(cond, std::move(body));
        HF2PTE_ASSIGN_OR_RETURN(TagStart next, open_tag(ps[pos++]));
        if (stop == "endif") break;
        if (stop == "else") {
          cond = nullptr;
        } else {
          if (!cond) return template_error("{% elif %} after {% else %}");
          HF2PTE_ASSIGN_OR_RETURN(cond, next.rest->expression());
          HF2PTE_RETURN_IF_ERROR(next.rest->expect_end("{% elif %}"));
        }
      }
    } else if (tag.keyword == "for") {
      n.k = Node::kFor;
      do {
        HF2PTE_ASSIGN_OR_RETURN(std::string var, rest.name());
        n.names.push_back(var);
      } while (rest.accept(Tok::kOp, ","));
      if (!rest.accept(Tok::kName, "in")) return unsupported("for loop without 'in'");
      HF2PTE_ASSIGN_OR_RETURN(n.expr, rest.or_expression());
      if (rest.accept(Tok::kName, "if")) {
        HF2PTE_ASSIGN_OR_RETURN(n.cond, rest.or_expression());
      }
      if (rest.accept(Tok::kName, "recursive")) return unsupported("recursive for loop");
      HF2PTE_RETURN_IF_ERROR(rest.expect_end("{% for %}"));
      HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(ps, pos, n.body, {"endfor", "else"}, depth + 1));
      if (stop == "else") {
        HF2PTE_ASSIGN_OR_RETURN(TagStart else_tag, open_tag(ps[pos++]));
        HF2PTE_RETURN_IF_ERROR(else_tag.rest->expect_end("{% else %}"));
        HF2PTE_ASSIGN_OR_RETURN(stop, parse_block(ps, pos, n.else_body, {"endfor"}, depth + 1));
      }
      if (stop.empty()) return template_error("missing {% endfor %}");
      ++pos;
    } else if (tag.keyword == "set") {
      n.k = Node::kSet;
      HF2PTE_ASSIGN_OR_RETURN(std::string var, rest.name());
      n.names.push_back(var);
      if (rest.accept(Tok::kOp, ".")) {
        HF2PTE_ASSIGN_OR_RETURN(std::string attr, rest.name());
        n.names.push_back(attr);
      }
      if (rest.is(Tok::kOp, ",")) return unsupported("{% set %} of several names");
      if (!rest.accept(Tok::kOp, "=")) return unsupported("block {% set %}");
      HF2PTE_ASSIGN_OR_RETURN(n.expr, rest.expression());
      HF2PTE_RETURN_IF_ERROR(rest.expect_end("{% set %}"));
    } else if (tag.keyword == "generation") {  // transformers' assistant-mask marker: renders its body
      HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(ps, pos, out, {"endgeneration"}, depth + 1));
      if (stop.empty()) return template_error("missing {% endgeneration %}");
      ++pos;
      continue;
    } else if (tag.keyword == "break" || tag.keyword == "continue") {
      n.k = tag.keyword == "break" ? Node::kBreak : Node::kContinue;
    } else {
      return unsupported("tag '{% " + tag.keyword + " %}'");
    }
    out.push_back(std::move(n));
  }
  return std::string();
}

enum class Flow { kNormal, kBreak, kContinue };

constexpr size_t kMaxOutput = size_t(64) << 20;  // a runaway template stops at 64 MiB

Result<Flow> render(const std::vector<Node>& nodes, Scope& scope, std::string& out) {
  Evaluator ev(scope);
  for (const auto& n : nodes) {
    if (out.size() > kMaxOutput) return template_error("output exceeds 64 MiB");
    switch (n.k) {
      case Node::kText: out += n.text; break;
      case Node::kOut: {
        HF2PTE_ASSIGN_OR_RETURN(Value v, ev.eval(*n.expr));
        out += to_str(v);
        break;
      }
      case Node::kSet: {
        HF2PTE_ASSIGN_OR_RETURN(Value v, ev.eval(*n.expr));
        if (n.names.size() == 1) {
          scope.vars[n.names[0]] = v;
          break;
        }
        const Value* ns = scope.find(n.names[0]);
        if (!ns || ns->kind != Value::kDict || !ns->dict->is_namespace) {
          return unsupported("attribute assignment '" + n.names[0] + "." + n.names[1] + "' on a non-namespace");
        }
        ns->dict->set(n.names[1], v);
        break;
      }
      case Node::kIf:
        for (const auto& [cond, body] : n.branches) {
          bool take = true;
          if (cond) {
            HF2PTE_ASSIGN_OR_RETURN(Value c, ev.eval(*cond));
            take = c.truthy();
          }
          if (!take) continue;
          HF2PTE_ASSIGN_OR_RETURN(Flow f, render(body, scope, out));
          if (f != Flow::kNormal) return f;
          break;
        }
        break;
      case Node::kFor: {
        HF2PTE_ASSIGN_OR_RETURN(Value it, ev.eval(*n.expr));
        HF2PTE_ASSIGN_OR_RETURN(List all, iterate(it));
        List items;
        for (const auto& x : all) {  // `for x in xs if cond` filters before loop.* is computed
          if (!n.cond) { items.push_back(x); continue; }
          Scope probe{{}, &scope};
          probe.vars[n.names[0]] = x;
          HF2PTE_ASSIGN_OR_RETURN(Value c, Evaluator(probe).eval(*n.cond));
          if (c.truthy()) items.push_back(x);
        }
        const int64_t len = static_cast<int64_t>(items.size());
        bool completed = false;  // some iteration ran its body to the end
        for (int64_t k = 0; k < len; ++k) {
          Scope inner{{}, &scope};
          Value loop = Value::new_dict();
          loop.dict->items = {{"index0", Value::integer(k)}, {"index", Value::integer(k + 1)},
                              {"revindex0", Value::integer(len - k - 1)}, {"revindex", Value::integer(len - k)},
                              {"first", Value::boolean(k == 0)}, {"last", Value::boolean(k + 1 == len)},
                              {"length", Value::integer(len)},
                              {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value{}},
                              {"nextitem", k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value{}}};
          inner.vars["loop"] = loop;
          const Value& x = items[static_cast<size_t>(k)];
          if (n.names.size() == 1) {
            inner.vars[n.names[0]] = x;
          } else {
            if (x.kind != Value::kList || x.list->size() != n.names.size()) {
              return template_error(fmt::format("cannot unpack a {} into {} loop variables", kind_name(x), n.names.size()));
            }
            for (size_t v = 0; v < n.names.size(); ++v) inner.vars[n.names[v]] = (*x.list)[v];
          }
          HF2PTE_ASSIGN_OR_RETURN(Flow f, render(n.body, inner, out));
          if (f == Flow::kNormal) completed = true;
          if (f == Flow::kBreak) break;
        }
        // for-else. Jinja2 renders it when no iteration ran its body to the end: the
        // sequence was empty, the `if` filter removed every item, or each iteration
        // that ran left through {% break %} / {% continue %} (Jinja2 3.x's generated code).
        if (!completed && !n.else_body.empty()) {
          Scope inner{{}, &scope};
          HF2PTE_ASSIGN_OR_RETURN(Flow f, render(n.else_body, inner, out));
          if (f != Flow::kNormal) return f;  // break/continue of an enclosing loop
        }
        break;
      }
      case Node::kBreak: return Flow::kBreak;
      case Node::kContinue: return Flow::kContinue;
    }
  }
  return Flow::kNormal;
}

}  // namespace

Result<std::string> render_chat_template(std::string_view tmpl, const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, std::string_view extra_vars_json) {
  HF2PTE_ASSIGN_OR_RETURN(auto pieces, split_template(tmpl));
  std::vector<Node> nodes;
  size_t pos = 0;
  HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(pieces, pos, nodes, {}));
  if (!stop.empty()) return template_error("unexpected {% " + stop + " %}");
  Scope scope;
  Value msgs = Value::new_list();
  for (const auto& m : messages) {
    Value v = Value::new_dict();
    v.dict->set("role", Value::str(m.role));
    v.dict->set("content", Value::str(m.content));
    if (m.reasoning_content) v.dict->set("reasoning_content", Value::str(*m.reasoning_content));
    msgs.list->push_back(v);
  }
  scope.vars["messages"] = msgs;
  scope.vars["add_generation_prompt"] = Value::boolean(add_generation_prompt);
  scope.vars["bos_token"] = Value::str(bos_token);
  scope.vars["eos_token"] = Value::str(eos_token);
  if (!extra_vars_json.empty()) {
    auto j = nlohmann::ordered_json::parse(extra_vars_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return make_error(ErrorCode::kInvalidArgument, "chat template variables must be a JSON object (command line)");
    }
    for (const auto& [k, x] : j.items()) scope.vars[k] = from_json(x);
  }
  std::string out;
  HF2PTE_ASSIGN_OR_RETURN(Flow f, render(nodes, scope, out));
  (void)f;
  return out;
}

Result<std::string> template_vars_json(const std::vector<std::string>& assignments) {
  auto vars = nlohmann::ordered_json::object();
  for (const std::string& a : assignments) {
    if (!tok::utf8_valid(a)) {  // nlohmann would throw on dumping it
      return make_error(ErrorCode::kInvalidArgument, "not valid UTF-8 (--template-var {})", tok::utf8_lossy(a));
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    auto bad = [&](const std::string& what) {
      return make_error(ErrorCode::kInvalidArgument, "{} (--template-var {})", what, a);
    };
    if (eq == std::string::npos) return bad("expected NAME=VALUE");
    const bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                            std::all_of(name.begin(), name.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                            });
    if (!identifier) return bad("'" + name + "' is not a template variable name (letters, digits, _)");
    if (name == "messages") return bad("'messages' is built from --system and --prompt, it cannot be set");
    if (name == "add_generation_prompt") return bad("'add_generation_prompt' is always true in generate --chat");
    const std::string text = a.substr(eq + 1);
    auto value = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    vars[name] = value.is_discarded() ? nlohmann::ordered_json(text) : std::move(value);
  }
  return vars.dump();
}

}  // namespace hf2pte::llm
