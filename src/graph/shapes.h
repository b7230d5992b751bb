// Shape functions: one per op in ops/ops.def (shapes::<Id>), computing the
// dtype and symbolic sizes of a node's outputs from its arguments.
#pragma once

#include <variant>
#include <vector>

#include "graph/graph.h"

namespace hf2pte::graph {

/// A node output: a tensor type, or the symbolic value of an integer output.
using OutputType = std::variant<TensorType, SymInt>;

/// Looks up the op's shape function and applies it.
Result<std::vector<OutputType>> infer_outputs(const Graph& g, OpId op, const std::vector<Arg>& args);

/// Numpy-style broadcast of two symbolic shapes; error when incompatible.
Result<std::vector<SymInt>> broadcast_shapes(const std::vector<SymInt>& a, const std::vector<SymInt>& b);

/// Normalises a possibly negative dim against `rank`; error when out of range.
Result<int> normalize_dim(int64_t dim, int rank);

}  // namespace hf2pte::graph
