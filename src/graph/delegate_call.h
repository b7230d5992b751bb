// What the partitioners share: walking a node's tensor arguments, and the
// node a partitioner puts in place of the run of nodes it lowered (a
// DelegateCall over a new Graph::delegates() entry: args[0] its index, args[1]
// the run's inputs; outputs in the payload's output order).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace hf2pte::graph {

/// Calls `f` for every tensor a node reads: tensor args and the items of
/// tensor lists (None entries skipped). Outputs are not visited.
inline void for_each_tensor_arg(const Node& n, const std::function<void(ValueId)>& f) {
  for (const auto& a : n.args) {
    if (const auto* id = std::get_if<ValueId>(&a)) f(*id);
    if (const auto* l = std::get_if<TensorList>(&a)) for (auto v : *l) f(v);
    if (const auto* l = std::get_if<OptTensorList>(&a)) for (const auto& v : *l) if (v) f(*v);
  }
}

inline Node delegate_call(Graph& g, Delegate d, std::string name, const std::vector<ValueId>& inputs,
                          std::vector<ValueId> outputs) {
  Node call;
  call.op = OpId::DelegateCall;
  call.name = std::move(name);
  call.args = {int64_t(g.add_delegate(std::move(d))), TensorList(inputs)};
  call.outputs = std::move(outputs);
  return call;
}

}  // namespace hf2pte::graph
