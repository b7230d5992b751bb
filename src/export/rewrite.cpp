#include "export/rewrite.h"

#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace hf2pte::exp {

namespace {

ValueId resolve(const std::unordered_map<ValueId, ValueId>& subst, ValueId v) {
  for (auto it = subst.find(v); it != subst.end(); it = subst.find(v)) v = it->second;
  return v;
}

void substitute(const std::unordered_map<ValueId, ValueId>& subst, graph::Arg& a) {
  if (auto* id = std::get_if<ValueId>(&a)) *id = resolve(subst, *id);
  if (auto* l = std::get_if<graph::TensorList>(&a)) for (auto& v : *l) v = resolve(subst, v);
  if (auto* l = std::get_if<graph::OptTensorList>(&a)) for (auto& v : *l) if (v) *v = resolve(subst, *v);
}

template <typename F>
void for_each_value_arg(const Node& n, F&& f) {
  for (const auto& a : n.args) {
    if (const auto* id = std::get_if<ValueId>(&a)) f(*id);
    if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) f(v);
    if (const auto* l = std::get_if<graph::OptTensorList>(&a)) for (auto v : *l) if (v) f(*v);
  }
}

}  // namespace

Result<RuleCounts> rewrite_to_fixed_point(Graph& g, const std::vector<Rule>& rules, int max_passes) {
  RuleCounts counts;
  for (int pass = 0; pass < max_passes; ++pass) {
    std::vector<Node> old = std::move(g.mutable_nodes());
    g.mutable_nodes().clear();
    std::unordered_map<ValueId, ValueId> subst;
    int fired = 0;
    for (auto& node : old) {
      for (auto& a : node.args) substitute(subst, a);
      bool replaced = false;
      for (const auto& rule : rules) {
        auto r = rule.fn(g, node);
        if (!r) return r.status().with_context(fmt::format("rule {}, node {}", rule.name, node.name));
        if (!r->has_value()) continue;
        const auto& repl = **r;
        if (repl.size() != node.outputs.size()) {
          return make_error(ErrorCode::kInternal, "rule {} replaced {} outputs with {} values (node {})", rule.name,
                            node.outputs.size(), repl.size(), node.name);
        }
        for (size_t i = 0; i < repl.size(); ++i) subst[node.outputs[i]] = repl[i];
        ++counts[rule.name];
        ++fired;
        replaced = true;
        break;
      }
      if (!replaced) g.mutable_nodes().push_back(std::move(node));
    }
    for (auto& out : g.mutable_outputs()) out = resolve(subst, out);
    if (fired == 0) {
      eliminate_dead_nodes(g);
      return counts;
    }
  }
  // Still firing after max_passes: two rules undo each other (or one re-emits its own source).
  std::string names;
  for (const auto& [name, n] : counts) names += (names.empty() ? "" : ", ") + name;
  return make_error(ErrorCode::kInternal, "decomposition rules did not reach a fixed point in {} passes ({})", max_passes, names);
}

namespace {

/// Whether `n` introduces a data-dependent size ("u<id>" on one of its outputs,
/// named after that output: nonzero). Later nodes may use the symbol without
/// using the tensor (a slice to [0, u)), and only this node's out yields it at
/// runtime, so it stays.
bool defines_unbacked_size(const Graph& g, const Node& n) {
  for (ValueId v : n.outputs) {
    const std::string name = fmt::format("u{}", v);
    for (const auto& s : g.value(v).type.sizes) {
      if (s.kind() == graph::SymInt::Kind::kUnbacked && s.dim_name() == name) return true;
    }
  }
  return false;
}

/// True when the op's schema writes an argument that is not one of its outs (`Tensor(a!) cache`).
bool mutates_an_input(OpId op) {
  for (const auto& a : op_schema(op).args) {
    if (a.mutated && !a.is_out) return true;
  }
  return false;
}

}  // namespace

int eliminate_dead_nodes(Graph& g) {
  int removed = 0;
  for (bool changed = true; changed;) {
    changed = false;
    std::unordered_set<ValueId> used(g.outputs().begin(), g.outputs().end());
    for (const auto& n : g.nodes()) for_each_value_arg(n, [&](ValueId v) { used.insert(v); });
    auto& nodes = g.mutable_nodes();
    std::vector<Node> kept;
    kept.reserve(nodes.size());
    for (auto& n : nodes) {
      // In-place ops (index_put_, llama::update_cache) have effects even when their outputs go unused.
      bool live = n.outputs.empty() || defines_unbacked_size(g, n) || mutates_an_input(n.op);
      for (auto v : n.outputs) live |= used.count(v) > 0;
      if (live) {
        kept.push_back(std::move(n));
      } else {
        ++removed;
        changed = true;
      }
    }
    nodes = std::move(kept);
  }
  return removed;
}

}  // namespace hf2pte::exp
