// Symbolic integers: sizes that depend on named dims (e.g. the sequence
// length "seq" in [1, 2048]). Expressions are immutable trees, simplified as
// they are built, compared structurally, and bounded through dim ranges.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace hf2pte::graph {

/// A named dim with an inclusive value range. `max` may be kUnbounded until the
/// program fixes cap it (docs/pipeline.md).
struct DimRange {
  int64_t min = 0;
  int64_t max = 0;
  static constexpr int64_t kUnbounded = INT64_MAX;
};
using DimRanges = std::map<std::string, DimRange>;

class SymInt {
 public:
  enum class Kind { kConst, kDim, kAdd, kSub, kMul, kFloorDiv, kMod, kMin, kMax };

  SymInt() : SymInt(int64_t{0}) {}
  SymInt(int64_t value);  // NOLINT: constants convert implicitly, as in torch
  static SymInt dim(std::string name);

  Kind kind() const { return node_->kind; }
  bool is_constant() const { return node_->kind == Kind::kConst; }
  int64_t constant_value() const { return node_->value; }  ///< only when is_constant()
  const std::string& dim_name() const { return node_->name; }  ///< only for kDim
  const SymInt& lhs() const { return *node_->lhs; }
  const SymInt& rhs() const { return *node_->rhs; }

  /// Value under an assignment of every dim it mentions; nullopt if one is missing
  /// or on division by zero.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& env) const;
  /// Bounds under the dim ranges (monotone interval arithmetic; exact for the
  /// expressions builders create: sums and products of non-negative terms).
  int64_t upper_bound(const DimRanges& ranges) const;
  int64_t lower_bound(const DimRanges& ranges) const;
  /// "seq", "(seq * 4)", "4": the canonical text, also used for equality.
  std::string str() const;

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);
  friend SymInt sym_min(const SymInt& a, const SymInt& b);
  friend SymInt sym_max(const SymInt& a, const SymInt& b);
  friend SymInt ceildiv(const SymInt& a, const SymInt& b);
  friend bool operator==(const SymInt& a, const SymInt& b) { return a.str() == b.str(); }

 private:
  struct Node {
    Kind kind = Kind::kConst;
    int64_t value = 0;
    std::string name;
    std::shared_ptr<const SymInt> lhs, rhs;
    std::string text;  // cached canonical form
  };
  explicit SymInt(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  static SymInt binary(Kind k, const SymInt& a, const SymInt& b);
  std::shared_ptr<const Node> node_;
};

}  // namespace hf2pte::graph
