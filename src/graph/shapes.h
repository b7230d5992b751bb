// Shape functions: one per op in ops/ops.def (shapes::<Id>), computing the
// dtype and symbolic sizes of a node's outputs from its arguments.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "graph/graph.h"

namespace hf2pte::graph {

/// A node output: a tensor type, or the symbolic value of an integer output.
using OutputType = std::variant<TensorType, SymInt>;

/// Looks up the op's shape function and applies it. `first_output` is the id
/// the node's first output has (the verifier re-inferring a node) or will get
/// (Graph::add_node; the default, g.num_values()). Ops with data-dependent
/// output sizes (nonzero) name their fresh unbacked symbol after it, "u<id>",
/// so inferring the same node twice gives the same symbol.
Result<std::vector<OutputType>> infer_outputs(const Graph& g, OpId op, const std::vector<Arg>& args,
                                              std::optional<ValueId> first_output = std::nullopt);

/// Numpy-style broadcast of two symbolic shapes; error when incompatible.
Result<std::vector<SymInt>> broadcast_shapes(const std::vector<SymInt>& a, const std::vector<SymInt>& b);

/// Normalises a possibly negative dim against `rank`; error when out of range.
Result<int> normalize_dim(int64_t dim, int rank);

}  // namespace hf2pte::graph
