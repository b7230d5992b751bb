// Graph rewriting: small named rules run to a fixed point by one driver that
// counts what fired (docs/STYLE.md rule 5).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace hf2pte::exp {

using graph::Graph;
using graph::Node;
using graph::ValueId;

/// A rule looks at one node (arguments already substituted). It returns nullopt
/// when it does not apply, or the values that replace the node's outputs after
/// emitting its replacement nodes into `g` with Graph::add/add_node.
using RuleFn = std::function<Result<std::optional<std::vector<ValueId>>>(Graph& g, const Node& node)>;

struct Rule {
  const char* name;  ///< e.g. "linear_to_mm"
  RuleFn fn;
};

/// Counts of rules that fired, by name.
using RuleCounts = std::map<std::string, int>;

/// Applies `rules` (first match wins per node) over the graph, repeating whole
/// passes until nothing fires. Node order is kept; replacement nodes take the
/// place of the node they replace. Still firing after `max_passes` passes (rules
/// that undo each other) is a kInternal error naming the rules.
Result<RuleCounts> rewrite_to_fixed_point(Graph& g, const std::vector<Rule>& rules, int max_passes = 16);

/// Removes nodes whose outputs are never used (in-place ops on buffers are kept).
int eliminate_dead_nodes(Graph& g);

}  // namespace hf2pte::exp
