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

}  // namespace

Status run_node_fixes(graph::Program& p, const ExportConfig& c, StageLog& log) {
  for (auto& g : p.methods) {
    int fixed = 0;
    for (auto& n : g.mutable_nodes()) {
      auto r = normalize_negative_dims(g, n);
      if (!r) return r.status().with_context(fmt::format("node {}", n.name));
      fixed += *r ? 1 : 0;
    }
    log.notes.push_back(fmt::format("{}: negative dims normalised in {} nodes", g.name(), fixed));
  }
  (void)c;
  return Status::ok();
}

}  // namespace hf2pte::exp
