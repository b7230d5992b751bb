// The node a partitioner puts in place of the run of nodes it lowered: a
// DelegateCall over a new Graph::delegates() entry (args[0] its index,
// args[1] the run's inputs; outputs in the payload's output order).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace hf2pte::graph {

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
