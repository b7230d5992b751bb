#include "graph/sym_int.h"

#include <algorithm>
#include <atomic>
#include <functional>

namespace hf2pte::graph {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

// Saturating arithmetic keeps bounds of unbounded dims at INT64_MAX.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return ((a < 0) != (b < 0)) ? INT64_MIN : INT64_MAX;
  return r;
}

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

std::atomic<uint64_t> g_printed_chars{0};

const char* op_text(SymInt::Kind k) {
  switch (k) {
    case SymInt::Kind::kAdd: return " + ";
    case SymInt::Kind::kSub: return " - ";
    case SymInt::Kind::kMul: return " * ";
    case SymInt::Kind::kFloorDiv: return " // ";
    case SymInt::Kind::kMod: return " % ";
    default: return "";
  }
}

}  // namespace

SymInt::SymInt(int64_t value) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::kConst;
  n->value = value;
  n->hash = mix(size_t(Kind::kConst), std::hash<int64_t>{}(value));
  node_ = std::move(n);
}

SymInt SymInt::dim(std::string name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::kDim;
  n->name = std::move(name);
  n->hash = mix(size_t(Kind::kDim), std::hash<std::string>{}(n->name));
  return SymInt(std::shared_ptr<const Node>(std::move(n)));
}

SymInt SymInt::unbacked(std::string name, std::optional<int64_t> upper) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::kUnbacked;
  n->name = std::move(name);
  n->value = upper.value_or(DimRange::kUnbounded);
  n->hash = mix(size_t(Kind::kUnbacked), std::hash<std::string>{}(n->name));
  return SymInt(std::shared_ptr<const Node>(std::move(n)));
}

std::optional<std::string> SymInt::unbounded_unbacked() const {
  switch (kind()) {
    case Kind::kConst:
    case Kind::kDim: return std::nullopt;
    case Kind::kUnbacked:
      return node_->value == DimRange::kUnbounded ? std::optional<std::string>(node_->name) : std::nullopt;
    default: break;
  }
  if (auto l = lhs().unbounded_unbacked()) return l;
  return rhs().unbounded_unbacked();
}

SymInt SymInt::binary(Kind k, const SymInt& a, const SymInt& b) {
  // Constant folding and identities: c1 op c2 -> c; x+0, x-0, x*1, x//1 -> x; x*0 -> 0.
  if (a.is_constant() && b.is_constant()) {
    int64_t x = a.constant_value(), y = b.constant_value();
    switch (k) {
      case Kind::kAdd: return x + y;
      case Kind::kSub: return x - y;
      case Kind::kMul: return x * y;
      case Kind::kFloorDiv: if (y != 0) return floor_div(x, y); break;
      case Kind::kMod: if (y != 0) return floor_mod(x, y); break;
      case Kind::kMin: return std::min(x, y);
      case Kind::kMax: return std::max(x, y);
      default: break;
    }
  }
  if (b.is_constant()) {
    int64_t y = b.constant_value();
    if ((k == Kind::kAdd || k == Kind::kSub) && y == 0) return a;
    if ((k == Kind::kMul || k == Kind::kFloorDiv) && y == 1) return a;
    if (k == Kind::kMul && y == 0) return 0;
  }
  if (a.is_constant()) {
    int64_t x = a.constant_value();
    if (k == Kind::kAdd && x == 0) return b;
    if (k == Kind::kMul && x == 1) return b;
    if (k == Kind::kMul && x == 0) return 0;
    // Canonical order for commutative ops: symbol first, constant last.
    if (k == Kind::kAdd || k == Kind::kMul || k == Kind::kMin || k == Kind::kMax) return binary(k, b, a);
  }
  // (x * c1) * c2 -> x * (c1*c2); (x + c1) + c2 -> x + (c1+c2)
  if ((k == Kind::kMul || k == Kind::kAdd) && b.is_constant() && a.kind() == k && a.rhs().is_constant()) {
    return binary(k, a.lhs(), binary(k, a.rhs(), b));
  }
  // (x + c1) - c2 -> x + (c1 - c2): an end sliced back by the offset it was built with.
  if (k == Kind::kSub && b.is_constant() && a.kind() == Kind::kAdd && a.rhs().is_constant()) {
    return binary(Kind::kAdd, a.lhs(), a.rhs().constant_value() - b.constant_value());
  }
  if (k == Kind::kSub && a == b) return 0;
  auto n = std::make_shared<Node>();
  n->kind = k;
  n->lhs = std::make_shared<SymInt>(a);
  n->rhs = std::make_shared<SymInt>(b);
  n->hash = mix(mix(size_t(k), a.hash()), b.hash());
  return SymInt(std::shared_ptr<const Node>(std::move(n)));
}

SymInt operator+(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kAdd, a, b); }
SymInt operator-(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kSub, a, b); }
SymInt operator*(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kMul, a, b); }
SymInt floordiv(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kFloorDiv, a, b); }
SymInt mod(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kMod, a, b); }
SymInt sym_min(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kMin, a, b); }
SymInt sym_max(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::kMax, a, b); }
// ceil(a / b) = -((-a) // b) = (a + b - 1) // b for b > 0
SymInt ceildiv(const SymInt& a, const SymInt& b) { return floordiv(a + b - 1, b); }
// a ** n = a * a * ... * a (n factors, left to right); a ** 0 = 1. n < 0 has no
// integer size and is treated as 0 factors as well (callers check n >= 0).
SymInt sym_pow(const SymInt& a, int64_t n) {
  SymInt out = 1;
  for (int64_t i = 0; i < n; ++i) out = out * a;
  return out;
}

void SymInt::print(std::string& out) const {
  switch (kind()) {
    case Kind::kConst: out += std::to_string(node_->value); return;
    case Kind::kDim:
    case Kind::kUnbacked: out += node_->name; return;
    case Kind::kMin:
    case Kind::kMax:
      out += kind() == Kind::kMin ? "min(" : "max(";
      lhs().print(out);
      out += ", ";
      rhs().print(out);
      out += ")";
      return;
    default:
      out += "(";
      lhs().print(out);
      out += op_text(kind());
      rhs().print(out);
      out += ")";
      return;
  }
}

std::string SymInt::str() const {
  std::string out;
  print(out);
  g_printed_chars.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

uint64_t SymInt::printed_chars() { return g_printed_chars.load(std::memory_order_relaxed); }

bool operator==(const SymInt& a, const SymInt& b) {
  if (a.node_ == b.node_) return true;
  if (a.node_->hash != b.node_->hash || a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case SymInt::Kind::kConst: return a.node_->value == b.node_->value;
    case SymInt::Kind::kDim:
    case SymInt::Kind::kUnbacked: return a.node_->name == b.node_->name;
    default: return a.lhs() == b.lhs() && a.rhs() == b.rhs();
  }
}

std::optional<int64_t> SymInt::evaluate(const std::map<std::string, int64_t>& env) const {
  switch (kind()) {
    case Kind::kConst: return node_->value;
    case Kind::kDim:
    case Kind::kUnbacked: {  // the runtime binds unbacked symbols by name once known
      auto it = env.find(node_->name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    default: break;
  }
  auto x = lhs().evaluate(env), y = rhs().evaluate(env);
  if (!x || !y) return std::nullopt;
  switch (kind()) {
    case Kind::kAdd: return *x + *y;
    case Kind::kSub: return *x - *y;
    case Kind::kMul: return *x * *y;
    case Kind::kFloorDiv: if (*y == 0) return std::nullopt; return floor_div(*x, *y);
    case Kind::kMod: if (*y == 0) return std::nullopt; return floor_mod(*x, *y);
    case Kind::kMin: return std::min(*x, *y);
    case Kind::kMax: return std::max(*x, *y);
    default: return std::nullopt;
  }
}

int64_t SymInt::upper_bound(const DimRanges& ranges) const {
  switch (kind()) {
    case Kind::kConst: return node_->value;
    case Kind::kDim: {
      auto it = ranges.find(node_->name);
      return it == ranges.end() ? DimRange::kUnbounded : it->second.max;
    }
    case Kind::kUnbacked: return node_->value;  // declared bound (kUnbounded if none)
    case Kind::kAdd: return sat_add(lhs().upper_bound(ranges), rhs().upper_bound(ranges));
    case Kind::kSub: return sat_add(lhs().upper_bound(ranges), -rhs().lower_bound(ranges));
    case Kind::kMul: {
      int64_t c[4] = {sat_mul(lhs().upper_bound(ranges), rhs().upper_bound(ranges)),
                      sat_mul(lhs().upper_bound(ranges), rhs().lower_bound(ranges)),
                      sat_mul(lhs().lower_bound(ranges), rhs().upper_bound(ranges)),
                      sat_mul(lhs().lower_bound(ranges), rhs().lower_bound(ranges))};
      return *std::max_element(c, c + 4);
    }
    case Kind::kFloorDiv: {
      int64_t d = rhs().lower_bound(ranges);
      return d > 0 ? floor_div(lhs().upper_bound(ranges), d) : lhs().upper_bound(ranges);
    }
    case Kind::kMod: return std::max<int64_t>(0, rhs().upper_bound(ranges) - 1);
    case Kind::kMin: return std::min(lhs().upper_bound(ranges), rhs().upper_bound(ranges));
    case Kind::kMax: return std::max(lhs().upper_bound(ranges), rhs().upper_bound(ranges));
  }
  return DimRange::kUnbounded;
}

int64_t SymInt::lower_bound(const DimRanges& ranges) const {
  switch (kind()) {
    case Kind::kConst: return node_->value;
    case Kind::kDim: {
      auto it = ranges.find(node_->name);
      return it == ranges.end() ? 0 : it->second.min;
    }
    case Kind::kUnbacked: return 0;
    case Kind::kAdd: return sat_add(lhs().lower_bound(ranges), rhs().lower_bound(ranges));
    case Kind::kSub: return sat_add(lhs().lower_bound(ranges), -rhs().upper_bound(ranges));
    case Kind::kMul: {
      int64_t c[4] = {sat_mul(lhs().upper_bound(ranges), rhs().upper_bound(ranges)),
                      sat_mul(lhs().upper_bound(ranges), rhs().lower_bound(ranges)),
                      sat_mul(lhs().lower_bound(ranges), rhs().upper_bound(ranges)),
                      sat_mul(lhs().lower_bound(ranges), rhs().lower_bound(ranges))};
      return *std::min_element(c, c + 4);
    }
    case Kind::kFloorDiv: {
      int64_t d = rhs().upper_bound(ranges);
      return d > 0 && d != DimRange::kUnbounded ? floor_div(lhs().lower_bound(ranges), d) : 0;
    }
    case Kind::kMod: return 0;
    case Kind::kMin: return std::min(lhs().lower_bound(ranges), rhs().lower_bound(ranges));
    case Kind::kMax: return std::max(lhs().lower_bound(ranges), rhs().lower_bound(ranges));
  }
  return 0;
}

int64_t SymInt::planning_bound(const DimRanges& ranges) const {
  const int64_t exact = upper_bound(ranges);
  if (exact != DimRange::kUnbounded) return exact;
  if (unbounded_unbacked()) return exact;  // no hint exists: nothing to clamp to
  std::map<std::string, int64_t> hints;
  for (const auto& [name, r] : ranges) hints[name] = r.hint_or_default();
  // A dim with no range at all has no hint either: the floor alone decides.
  std::optional<int64_t> hint = evaluate(hints);
  int64_t h = hint && *hint > 0 ? sat_mul(*hint, 4) : 0;
  return std::max(h, kUnboundedPlanningFloor);
}

}  // namespace hf2pte::graph
