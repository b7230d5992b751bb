// Symbolic integers: sizes that depend on named dims (e.g. the sequence
// length "seq" in [1, 2048]). Expressions are immutable trees, simplified as
// they are built, compared structurally, and bounded through dim ranges.
#pragma once

#include <algorithm>
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
  /// A typical value (the seed's trace hint); 0 = none, then hint_or_default().
  int64_t hint = 0;
  /// The largest value the builder's fixed-size buffers admit (an LLM's KV
  /// cache holds max_seq_len positions): range capping never goes above it.
  int64_t limit = kUnbounded;
  static constexpr int64_t kUnbounded = INT64_MAX;
  /// Without a hint: the value export validation samples, clamp(5, min, max).
  static constexpr int64_t kDefaultHint = 5;
  int64_t hint_or_default() const { return hint > 0 ? hint : std::clamp(kDefaultHint, min, std::max(min, max)); }
};
using DimRanges = std::map<std::string, DimRange>;

class SymInt {
 public:
  /// kUnbacked: a data-dependent ("unbacked") size, known only once an op has
  /// run (nonzero, masked_select, a size read from a tensor's value); it
  /// carries its own declared upper bound instead of a DimRange.
  enum class Kind { kConst, kDim, kAdd, kSub, kMul, kFloorDiv, kMod, kMin, kMax, kUnbacked };

  SymInt() : SymInt(int64_t{0}) {}
  SymInt(int64_t value);  // NOLINT: constants convert implicitly, as in torch
  static SymInt dim(std::string name);
  /// A data-dependent size named `name` ("u0") in [0, upper]; nullopt = no
  /// declared bound, which the verifier rejects (nothing could be planned).
  static SymInt unbacked(std::string name, std::optional<int64_t> upper);

  Kind kind() const { return node_->kind; }
  bool is_constant() const { return node_->kind == Kind::kConst; }
  int64_t constant_value() const { return node_->value; }  ///< only when is_constant()
  const std::string& dim_name() const { return node_->name; }  ///< for kDim and kUnbacked
  /// The first unbacked symbol in the expression without a declared bound.
  std::optional<std::string> unbounded_unbacked() const;
  const SymInt& lhs() const { return *node_->lhs; }
  const SymInt& rhs() const { return *node_->rhs; }

  /// Value under an assignment of every dim it mentions; nullopt if one is missing
  /// or on division by zero.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& env) const;
  /// Bounds under the dim ranges (monotone interval arithmetic; exact for the
  /// expressions builders create: sums and products of non-negative terms).
  int64_t upper_bound(const DimRanges& ranges) const;
  int64_t lower_bound(const DimRanges& ranges) const;
  /// The bound memory planning uses (the seed's item 19): upper_bound when it
  /// is finite; otherwise (a dim is unbounded or the interval arithmetic
  /// saturated) max(hint * 4, 1024), hint = the expression at the dims' hints.
  /// Unbacked symbols have no hint: with one that has no declared bound the
  /// result stays kUnbounded (an error for the verifier and the planner).
  /// A finite bound is never changed, so this can only differ where no real
  /// bound exists; the runtime then rejects a size above the planned capacity.
  int64_t planning_bound(const DimRanges& ranges) const;
  static constexpr int64_t kUnboundedPlanningFloor = 1024;
  /// "seq", "(seq * 4)", "4": the canonical text, built on demand (messages,
  /// dumps). Nothing in the pipeline's passes prints: equality and hashing
  /// are structural and O(1) per node, so no pass costs time proportional to
  /// the printed size of an expression (the seed's item 32).
  std::string str() const;
  /// Structural hash, computed once per node from its children's.
  size_t hash() const { return node_->hash; }
  /// Characters str() has produced in this process (a diagnostic for tests).
  static uint64_t printed_chars();

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);
  friend SymInt sym_min(const SymInt& a, const SymInt& b);
  friend SymInt sym_max(const SymInt& a, const SymInt& b);
  friend SymInt ceildiv(const SymInt& a, const SymInt& b);
  /// a ** n for n >= 0 as a product chain (the seed's item 39: pow on sizes becomes
  /// executorch_prim::mul.Scalar instructions, so it runs wherever mul does).
  friend SymInt sym_pow(const SymInt& a, int64_t n);
  /// Same tree: kinds, constants and names equal node by node (unbacked
  /// symbols by name). Shared nodes compare in O(1).
  friend bool operator==(const SymInt& a, const SymInt& b);

 private:
  struct Node {
    Kind kind = Kind::kConst;
    int64_t value = 0;
    std::string name;
    std::shared_ptr<const SymInt> lhs, rhs;
    size_t hash = 0;
  };
  void print(std::string& out) const;
  explicit SymInt(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  static SymInt binary(Kind k, const SymInt& a, const SymInt& b);
  std::shared_ptr<const Node> node_;
};

/// For unordered containers keyed by expression.
struct SymIntHash {
  size_t operator()(const SymInt& s) const { return s.hash(); }
};

}  // namespace hf2pte::graph
