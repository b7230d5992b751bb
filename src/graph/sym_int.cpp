#include "graph/sym_int.h"

#include <algorithm>

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
  n->text = std::to_string(value);
  node_ = std::move(n);
}

SymInt SymInt::dim(std::string name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::kDim;
  n->name = std::move(name);
  n->text = n->name;
  return SymInt(std::shared_ptr<const Node>(std::move(n)));
}

SymInt SymInt::unbacked(std::string name, std::optional<int64_t> upper) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::kUnbacked;
  n->name = std::move(name);
  n->value = upper.value_or(DimRange::kUnbounded);
  n->text = n->name;
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
  if (k == Kind::kSub && a == b) return 0;
  auto n = std::make_shared<Node>();
  n->kind = k;
  n->lhs = std::make_shared<SymInt>(a);
  n->rhs = std::make_shared<SymInt>(b);
  if (k == Kind::kMin || k == Kind::kMax) {
    n->text = std::string(k == Kind::kMin ? "min(" : "max(") + a.str() + ", " + b.str() + ")";
  } else {
    n->text = "(" + a.str() + op_text(k) + b.str() + ")";
  }
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

std::string SymInt::str() const { return node_->text; }

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
