#include <algorithm>

#include <fmt/format.h>

#include "export/rewrite.h"
#include "export/stages.h"
#include "graph/shapes.h"

namespace hf2pte::exp {

namespace {

// Negative dims -> dim + rank, for every `int dim` / `int[] dim` / `int[] dims`
// argument in the op's schema (seed item 36, applied to every op with dims).
Result<bool> normalize_negative_dims(graph::Graph& g, graph::Node& n) {
  const auto& schema = op_schema(n.op);
  if (n.args.empty()) return false;
  int rank = -1;
  if (const auto* x = std::get_if<graph::ValueId>(&n.args[0])) {
    rank = g.type(*x).rank();
  } else if (const auto* l = std::get_if<graph::TensorList>(&n.args[0]); l && !l->empty()) {
    rank = g.type((*l)[0]).rank();
  }
  if (rank < 0) return false;
  bool changed = false;
  for (size_t i = 0; i < n.args.size() && i < schema.args.size(); ++i) {
    const auto& name = schema.args[i].name;
    if (name != "dim" && name != "dims") continue;
    auto fix = [&](graph::SymInt& d) -> Status {
      if (!d.is_constant() || d.constant_value() >= 0) return Status::ok();
      HF2PTE_ASSIGN_OR_RETURN(int nd, graph::normalize_dim(d.constant_value(), rank));
      d = graph::SymInt(int64_t(nd));
      changed = true;
      return Status::ok();
    };
    if (auto* v = std::get_if<int64_t>(&n.args[i]); v && *v < 0) {
      HF2PTE_ASSIGN_OR_RETURN(int nd, graph::normalize_dim(*v, rank));
      *v = nd;
      changed = true;
    }
    if (auto* s = std::get_if<graph::SymInt>(&n.args[i])) HF2PTE_RETURN_IF_ERROR(fix(*s));
    if (auto* l = std::get_if<graph::IntList>(&n.args[i])) {
      for (auto& d : *l) HF2PTE_RETURN_IF_ERROR(fix(d));
    }
  }
  return changed;
}

/// A size provably 0 under the graph's dim ranges (a symbolic size that may be
/// non-zero is not: pruning it would change the result when it is).
bool provably_empty(const graph::Graph& g, ValueId v) {
  for (const auto& s : g.type(v).sizes) {
    if (s.upper_bound(g.dims()) == 0) return true;
  }
  return false;
}

// cat(xs, dim) -> cat([x in xs if not provably empty], dim); one left -> x
// itself; none left -> a zero-element constant of the output's type (seed item
// 20: inputs whose size is unknown are kept; an all-empty cat becomes a filled
// tensor, which has no elements here since every input is empty along `dim`).
Result<std::optional<std::vector<ValueId>>> prune_empty_cat_inputs(Graph& g, const Node& n) {
  if (n.op != OpId::CatOut) return std::optional<std::vector<ValueId>>{};
  const auto& xs = std::get<graph::TensorList>(n.args[0]);
  graph::TensorList kept;
  for (ValueId x : xs) {
    if (!provably_empty(g, x)) kept.push_back(x);
  }
  if (kept.size() == xs.size()) return std::optional<std::vector<ValueId>>{};
  const graph::TensorType out = g.type(n.outputs[0]);  // copy: adding values reallocates
  if (kept.size() == 1 && g.type(kept[0]).sizes == out.sizes) return std::optional<std::vector<ValueId>>{{kept[0]}};
  if (kept.empty()) {
    std::vector<int64_t> sizes;
    for (const auto& s : out.sizes) {
      if (!s.is_constant()) return std::optional<std::vector<ValueId>>{};  // symbolic shape: leave the cat
      sizes.push_back(s.constant_value());
    }
    return std::optional<std::vector<ValueId>>{
        {g.add_constant(n.name + ".empty", graph::ConstantData::from_bytes(out.dtype, sizes, {}, "empty cat"))}};
  }
  auto args = n.args;
  args[0] = kept;
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::CatOut, std::move(args), n.name));
  return std::optional<std::vector<ValueId>>{{y}};
}

/// A symbolic slice bound that is provably negative under the dim ranges.
bool provably_negative_symbolic(const graph::Graph& g, const graph::Arg& a) {
  const auto* s = std::get_if<graph::SymInt>(&a);
  return s != nullptr && !s->is_constant() && s->upper_bound(g.dims()) < 0;
}

// slice(x, dim, start, end) with a symbolic start (or end) that is provably
// negative -> slice(x, dim, size(dim) + start, ...) (seed item 38): torch counts
// negative bounds from the end; written out, the bound is a plain size
// expression that shape functions, the planner and sym_size/prim ops handle.
Result<std::optional<std::vector<ValueId>>> symbolic_negative_slice_bounds(Graph& g, const Node& n) {
  if (n.op != OpId::SliceCopyTensorOut) return std::optional<std::vector<ValueId>>{};
  const bool fix_start = provably_negative_symbolic(g, n.args[2]), fix_end = provably_negative_symbolic(g, n.args[3]);
  if (!fix_start && !fix_end) return std::optional<std::vector<ValueId>>{};
  const ValueId x = std::get<ValueId>(n.args[0]);
  const int rank = g.type(x).rank();
  const auto* dim_i = std::get_if<int64_t>(&n.args[1]);
  const auto* dim_s = std::get_if<graph::SymInt>(&n.args[1]);
  if (dim_i == nullptr && (dim_s == nullptr || !dim_s->is_constant())) return std::optional<std::vector<ValueId>>{};
  HF2PTE_ASSIGN_OR_RETURN(int d, graph::normalize_dim(dim_i ? *dim_i : dim_s->constant_value(), rank));
  const graph::SymInt size = g.type(x).sizes[size_t(d)];
  auto args = n.args;
  if (fix_start) args[2] = size + std::get<graph::SymInt>(n.args[2]);
  if (fix_end) args[3] = size + std::get<graph::SymInt>(n.args[3]);
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, g.add(OpId::SliceCopyTensorOut, std::move(args), n.name));
  return std::optional<std::vector<ValueId>>{{y}};
}

}  // namespace

Status run_node_fixes(graph::Program& p, const ExportConfig& c, StageLog& log) {
  for (auto& g : p.methods) {
    int fixed = 0;
    for (auto& n : g.mutable_nodes()) {
      auto r = normalize_negative_dims(g, n);
      if (!r) return r.status().with_context(fmt::format("node {}", n.name));
      fixed += *r ? 1 : 0;
    }
    // Only graphs with a cat go through the rewrite driver (which also drops
    // nodes left dead); the other fixes edit nodes in place.
    RuleCounts pruned;
    if (std::any_of(g.nodes().begin(), g.nodes().end(),
                    [](const Node& n) { return n.op == OpId::CatOut || n.op == OpId::SliceCopyTensorOut; })) {
      HF2PTE_ASSIGN_OR_RETURN(pruned, rewrite_to_fixed_point(g, {{"prune_empty_cat_inputs", prune_empty_cat_inputs},
                                                                 {"symbolic_negative_slice_bounds",
                                                                  symbolic_negative_slice_bounds}}));
    }
    log.notes.push_back(fmt::format("{}: negative dims normalised in {} nodes, {} cats pruned of empty inputs, {} "
                                    "symbolic negative slice bounds rewritten",
                                    g.name(), fixed, pruned["prune_empty_cat_inputs"],
                                    pruned["symbolic_negative_slice_bounds"]));
  }
  (void)c;
  return Status::ok();
}

}  // namespace hf2pte::exp
