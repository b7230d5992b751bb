// A small Jinja interpreter: the template is cut into text and tags, the
// tags are parsed into a tree (if/for/set/output), and expressions are parsed
// by recursive descent and evaluated over dynamically typed values.
#include "llm/tokenizer/chat_template.h"

#include <cctype>
#include <map>
#include <memory>
#include <optional>

namespace hf2pte::llm {
namespace {

struct Value;
using List = std::vector<Value>;
using Map = std::map<std::string, Value>;

struct Value {
  enum Kind { kUndefined, kNone, kBool, kInt, kStr, kList, kMap } kind = kUndefined;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Map> map;
  static Value str(std::string v) { Value x; x.kind = kStr; x.s = std::move(v); return x; }
  static Value boolean(bool v) { Value x; x.kind = kBool; x.b = v; return x; }
  static Value integer(int64_t v) { Value x; x.kind = kInt; x.i = v; return x; }
  bool truthy() const {
    switch (kind) {
      case kBool: return b;
      case kInt: return i != 0;
      case kStr: return !s.empty();
      case kList: return !list->empty();
      case kMap: return !map->empty();
      default: return false;
    }
  }
  std::string to_string() const {
    switch (kind) {
      case kStr: return s;
      case kInt: return std::to_string(i);
      case kBool: return b ? "True" : "False";
      case kNone: return "None";
      default: return "";
    }
  }
};

bool equal(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::kStr: return a.s == b.s;
    case Value::kInt: return a.i == b.i;
    case Value::kBool: return a.b == b.b;
    default: return a.kind == Value::kNone || a.kind == Value::kUndefined;
  }
}

Status unsupported(const std::string& what) {
  return make_error(ErrorCode::kNotSupported, "chat template: {} is not supported (tokenizer_config.json)", what);
}

// ---- expressions ----

struct Tok { enum K { kName, kStr, kInt, kOp, kEnd } k; std::string v; };

Result<std::vector<Tok>> lex(std::string_view e) {
  std::vector<Tok> out;
  for (size_t i = 0; i < e.size();) {
    char c = e[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '_')) ++j;
      out.push_back({Tok::kName, std::string(e.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < e.size() && std::isdigit(static_cast<unsigned char>(e[j]))) ++j;
      out.push_back({Tok::kInt, std::string(e.substr(i, j - i))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t j = i + 1;
      for (; j < e.size() && e[j] != c; ++j) {
        if (e[j] == '\\' && j + 1 < e.size()) {
          char n = e[++j];
          s += n == 'n' ? '\n' : n == 't' ? '\t' : n;
        } else {
          s += e[j];
        }
      }
      if (j >= e.size()) return make_error(ErrorCode::kInvalidInput, "chat template: unterminated string (tokenizer_config.json)");
      out.push_back({Tok::kStr, s});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">="};
      std::string op(1, c);
      for (const char* t : two) if (e.substr(i, 2) == t) op = t;
      out.push_back({Tok::kOp, op});
      i += op.size();
    }
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

using Scope = Map;

class Expr {
 public:
  Expr(std::vector<Tok> toks, Scope& scope) : t_(std::move(toks)), scope_(scope) {}
  Result<Value> parse_all() {
    HF2PTE_ASSIGN_OR_RETURN(Value v, parse_or());
    if (t_[p_].k != Tok::kEnd) return unsupported("expression token '" + t_[p_].v + "'");
    return v;
  }

 private:
  bool is(Tok::K k, const char* v) const { return t_[p_].k == k && t_[p_].v == v; }
  bool accept(Tok::K k, const char* v) { if (is(k, v)) { ++p_; return true; } return false; }

  Result<Value> parse_or() {
    HF2PTE_ASSIGN_OR_RETURN(Value a, parse_and());
    while (accept(Tok::kName, "or")) {
      HF2PTE_ASSIGN_OR_RETURN(Value b, parse_and());
      a = a.truthy() ? a : b;
    }
    return a;
  }
  Result<Value> parse_and() {
    HF2PTE_ASSIGN_OR_RETURN(Value a, parse_not());
    while (accept(Tok::kName, "and")) {
      HF2PTE_ASSIGN_OR_RETURN(Value b, parse_not());
      a = a.truthy() ? b : a;
    }
    return a;
  }
  Result<Value> parse_not() {
    if (accept(Tok::kName, "not")) {
      HF2PTE_ASSIGN_OR_RETURN(Value a, parse_not());
      return Value::boolean(!a.truthy());
    }
    return parse_cmp();
  }
  Result<Value> parse_cmp() {
    HF2PTE_ASSIGN_OR_RETURN(Value a, parse_add());
    while (true) {
      if (accept(Tok::kName, "is")) {
        bool neg = accept(Tok::kName, "not");
        std::string test = t_[p_++].v;
        bool r;
        if (test == "defined") r = a.kind != Value::kUndefined;
        else if (test == "none") r = a.kind == Value::kNone;
        else if (test == "string") r = a.kind == Value::kStr;
        else return unsupported("test 'is " + test + "'");
        a = Value::boolean(neg ? !r : r);
        continue;
      }
      std::string op = t_[p_].k == Tok::kOp ? t_[p_].v : "";
      bool in = is(Tok::kName, "in");
      if (op != "==" && op != "!=" && op != "<" && op != ">" && op != "<=" && op != ">=" && !in) return a;
      ++p_;
      HF2PTE_ASSIGN_OR_RETURN(Value b, parse_add());
      if (in) {
        bool r = false;
        if (b.kind == Value::kStr && a.kind == Value::kStr) r = b.s.find(a.s) != std::string::npos;
        else if (b.kind == Value::kList) for (const auto& x : *b.list) r = r || equal(x, a);
        else if (b.kind == Value::kMap) r = a.kind == Value::kStr && b.map->count(a.s) > 0;
        a = Value::boolean(r);
      } else if (op == "==" || op == "!=") {
        a = Value::boolean(equal(a, b) == (op == "=="));
      } else {
        if (a.kind != Value::kInt || b.kind != Value::kInt) return unsupported("ordering of non-integers");
        bool r = op == "<" ? a.i < b.i : op == ">" ? a.i > b.i : op == "<=" ? a.i <= b.i : a.i >= b.i;
        a = Value::boolean(r);
      }
    }
  }
  Result<Value> parse_add() {
    HF2PTE_ASSIGN_OR_RETURN(Value a, parse_filter());
    while (is(Tok::kOp, "+") || is(Tok::kOp, "-") || is(Tok::kOp, "~")) {
      std::string op = t_[p_++].v;
      HF2PTE_ASSIGN_OR_RETURN(Value b, parse_filter());
      if (op == "~" || (op == "+" && (a.kind == Value::kStr || b.kind == Value::kStr))) {
        a = Value::str(a.to_string() + b.to_string());
      } else if (a.kind == Value::kInt && b.kind == Value::kInt) {
        a = Value::integer(op == "+" ? a.i + b.i : a.i - b.i);
      } else {
        return unsupported("'" + op + "' on these operands");
      }
    }
    return a;
  }
  Result<Value> parse_filter() {
    HF2PTE_ASSIGN_OR_RETURN(Value a, parse_postfix());
    while (accept(Tok::kOp, "|")) {
      std::string f = t_[p_++].v;
      if (f == "trim") {
        std::string s = a.to_string();
        size_t b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
        a = Value::str(b == std::string::npos ? "" : s.substr(b, e - b + 1));
      } else if (f == "length") {
        a = Value::integer(a.kind == Value::kList ? int64_t(a.list->size()) : int64_t(a.to_string().size()));
      } else if (f == "upper" || f == "lower") {
        std::string s = a.to_string();
        for (auto& ch : s) ch = char(f == "upper" ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
        a = Value::str(s);
      } else {
        return unsupported("filter '" + f + "'");
      }
    }
    return a;
  }
  Result<Value> parse_postfix() {
    HF2PTE_ASSIGN_OR_RETURN(Value a, parse_primary());
    while (true) {
      std::string key;
      if (accept(Tok::kOp, ".")) {
        key = t_[p_++].v;
        if (is(Tok::kOp, "(")) return unsupported("method call '." + key + "()'");
      } else if (accept(Tok::kOp, "[")) {
        HF2PTE_ASSIGN_OR_RETURN(Value k, parse_or());
        if (!accept(Tok::kOp, "]")) return unsupported("slices");
        if (a.kind == Value::kList && k.kind == Value::kInt) {
          int64_t n = int64_t(a.list->size()), idx = k.i < 0 ? k.i + n : k.i;
          a = idx >= 0 && idx < n ? (*a.list)[size_t(idx)] : Value{};
          continue;
        }
        key = k.to_string();
      } else {
        return a;
      }
      if (a.kind != Value::kMap) { a = Value{}; continue; }
      auto it = a.map->find(key);
      a = it == a.map->end() ? Value{} : it->second;
    }
  }
  Result<Value> parse_primary() {
    Tok t = t_[p_++];
    if (t.k == Tok::kStr) return Value::str(t.v);
    if (t.k == Tok::kInt) return Value::integer(std::stoll(t.v));
    if (t.k == Tok::kOp && t.v == "(") {
      HF2PTE_ASSIGN_OR_RETURN(Value v, parse_or());
      if (!accept(Tok::kOp, ")")) return unsupported("expression without ')'");
      return v;
    }
    if (t.k == Tok::kName) {
      if (t.v == "true" || t.v == "True") return Value::boolean(true);
      if (t.v == "false" || t.v == "False") return Value::boolean(false);
      if (t.v == "none" || t.v == "None") { Value v; v.kind = Value::kNone; return v; }
      if (t.v == "raise_exception" && accept(Tok::kOp, "(")) {
        HF2PTE_ASSIGN_OR_RETURN(Value msg, parse_or());
        return make_error(ErrorCode::kInvalidArgument, "chat template: {}", msg.to_string());
      }
      if (is(Tok::kOp, "(")) return unsupported("function '" + t.v + "'");
      auto it = scope_.find(t.v);
      return it == scope_.end() ? Value{} : it->second;
    }
    return unsupported("token '" + t.v + "'");
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  Scope& scope_;
};

Result<Value> eval(std::string_view src, Scope& scope) {
  HF2PTE_ASSIGN_OR_RETURN(auto toks, lex(src));
  return Expr(std::move(toks), scope).parse_all();
}

// ---- statements ----

struct Node {
  enum Kind { kText, kOut, kIf, kFor, kSet } kind = kText;
  std::string text;  // text, output expr, set expr, for iterable
  std::string name;  // set / for variable
  std::vector<std::pair<std::string, std::vector<Node>>> branches;  // if: (cond, body); "" = else
  std::vector<Node> body;
};

struct Piece { bool tag; bool out; std::string s; };  // tag: {% %}; out: {{ }}

Result<std::vector<Piece>> split_template(std::string_view t) {
  std::vector<Piece> out;
  size_t i = 0;
  bool trim_next = false;
  while (i < t.size()) {
    size_t open = t.find('{', i);
    while (open != std::string_view::npos && open + 1 < t.size() && t[open + 1] != '{' && t[open + 1] != '%' && t[open + 1] != '#') {
      open = t.find('{', open + 1);
    }
    std::string text(t.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i));
    if (trim_next) text.erase(0, text.find_first_not_of(" \t\n\r") == std::string::npos ? text.size() : text.find_first_not_of(" \t\n\r"));
    if (open == std::string_view::npos || open + 1 >= t.size()) {
      out.push_back({false, false, text});
      break;
    }
    char kind = t[open + 1];
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = t.find(close, open + 2);
    if (end == std::string_view::npos) return make_error(ErrorCode::kInvalidInput, "chat template: unclosed tag (tokenizer_config.json)");
    std::string inner(t.substr(open + 2, end - open - 2));
    if (!inner.empty() && inner[0] == '-') {
      inner.erase(0, 1);
      text.erase(text.find_last_not_of(" \t\n\r") + 1);
    }
    trim_next = !inner.empty() && inner.back() == '-';
    if (trim_next) inner.pop_back();
    out.push_back({false, false, text});
    if (kind != '#') out.push_back({kind == '%', kind == '{', inner});
    i = end + 2;
  }
  return out;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Parses pieces[pos...] until one of `stops` (a tag keyword); returns the stop keyword met.
Result<std::string> parse_block(const std::vector<Piece>& ps, size_t& pos, std::vector<Node>& out,
                                const std::vector<std::string>& stops) {
  while (pos < ps.size()) {
    const Piece& p = ps[pos++];
    if (!p.tag && !p.out) { if (!p.s.empty()) out.push_back({Node::kText, p.s, "", {}, {}}); continue; }
    if (p.out) { out.push_back({Node::kOut, p.s, "", {}, {}}); continue; }
    std::string s = trim(p.s);
    std::string kw = s.substr(0, s.find_first_of(" \t\n"));
    std::string rest = trim(s.substr(kw.size()));
    for (const auto& st : stops) if (kw == st) { pos--; return kw; }
    if (kw == "if") {
      Node n{Node::kIf, "", "", {}, {}};
      std::string cond = rest;
      while (true) {
        std::vector<Node> body;
        HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(ps, pos, body, {"elif", "else", "endif"}));
        n.branches.emplace_back(cond, std::move(body));
        std::string tag = trim(ps[pos++].s);
        if (stop == "endif") break;
        cond = stop == "elif" ? trim(tag.substr(4)) : "true";
      }
      out.push_back(std::move(n));
    } else if (kw == "for") {
      size_t in = rest.find(" in ");
      if (in == std::string::npos) return unsupported("for loop '" + s + "'");
      Node n{Node::kFor, trim(rest.substr(in + 4)), trim(rest.substr(0, in)), {}, {}};
      HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(ps, pos, n.body, {"endfor"}));
      (void)stop;
      ++pos;
      out.push_back(std::move(n));
    } else if (kw == "set") {
      size_t eq = rest.find('=');
      if (eq == std::string::npos) return unsupported("block set");
      out.push_back({Node::kSet, trim(rest.substr(eq + 1)), trim(rest.substr(0, eq)), {}, {}});
    } else {
      return unsupported("tag '" + kw + "'");
    }
  }
  if (!stops.empty()) return make_error(ErrorCode::kInvalidInput, "chat template: missing {{% {} %}} (tokenizer_config.json)", stops.back());
  return std::string();
}

Status render(const std::vector<Node>& nodes, Scope& scope, std::string& out) {
  for (const auto& n : nodes) {
    switch (n.kind) {
      case Node::kText: out += n.text; break;
      case Node::kOut: {
        HF2PTE_ASSIGN_OR_RETURN(Value v, eval(n.text, scope));
        out += v.to_string();
        break;
      }
      case Node::kSet: {
        if (n.name.find('.') != std::string::npos) return unsupported("namespace assignment '" + n.name + "'");
        HF2PTE_ASSIGN_OR_RETURN(Value v, eval(n.text, scope));
        scope[n.name] = v;
        break;
      }
      case Node::kIf:
        for (const auto& [cond, body] : n.branches) {
          HF2PTE_ASSIGN_OR_RETURN(Value c, eval(cond, scope));
          if (c.truthy()) { HF2PTE_RETURN_IF_ERROR(render(body, scope, out)); break; }
        }
        break;
      case Node::kFor: {
        HF2PTE_ASSIGN_OR_RETURN(Value it, eval(n.text, scope));
        if (it.kind != Value::kList) return unsupported("for over a non-list");
        const auto items = *it.list;
        for (size_t k = 0; k < items.size(); ++k) {
          Value loop;
          loop.kind = Value::kMap;
          loop.map = std::make_shared<Map>(Map{{"index0", Value::integer(int64_t(k))}, {"index", Value::integer(int64_t(k + 1))},
                                               {"first", Value::boolean(k == 0)}, {"last", Value::boolean(k + 1 == items.size())},
                                               {"length", Value::integer(int64_t(items.size()))}});
          scope["loop"] = loop;
          scope[n.name] = items[k];
          HF2PTE_RETURN_IF_ERROR(render(n.body, scope, out));
        }
        break;
      }
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::string> render_chat_template(std::string_view tmpl, const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token) {
  HF2PTE_ASSIGN_OR_RETURN(auto pieces, split_template(tmpl));
  std::vector<Node> nodes;
  size_t pos = 0;
  HF2PTE_ASSIGN_OR_RETURN(std::string stop, parse_block(pieces, pos, nodes, {}));
  (void)stop;
  Scope scope;
  Value msgs;
  msgs.kind = Value::kList;
  msgs.list = std::make_shared<List>();
  for (const auto& m : messages) {
    Value v;
    v.kind = Value::kMap;
    v.map = std::make_shared<Map>(Map{{"role", Value::str(m.role)}, {"content", Value::str(m.content)}});
    msgs.list->push_back(v);
  }
  scope["messages"] = msgs;
  scope["add_generation_prompt"] = Value::boolean(add_generation_prompt);
  scope["bos_token"] = Value::str(bos_token);
  scope["eos_token"] = Value::str(eos_token);
  std::string out;
  HF2PTE_RETURN_IF_ERROR(render(nodes, scope, out));
  return out;
}

}  // namespace hf2pte::llm
