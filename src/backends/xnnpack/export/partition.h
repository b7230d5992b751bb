// The XNNPACK partitioner (export stage 6 for --backend xnnpack): claims the
// nodes upstream's XnnpackPartitioner claims that our runtime supports
// (docs/xnnpack.md, "Export"), groups them and replaces each group by one
// DelegateCall node whose payload serialize.cpp writes.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "graph/graph.h"

namespace hf2pte::xnn {

struct PartitionStats {
  int partitions = 0;
  int claimed_nodes = 0;
  std::map<std::string, int> xnn_nodes;  ///< XNNPACK node kind -> count ("XNNFullyConnected")
};

/// Which ops the partitioner may claim.
struct PartitionOptions {
  /// mm/addmm with a constant 2-D weight only (FullyConnected); else every supported op.
  bool linear_only = false;
  /// Element type FullyConnected filters are written in: kFloat, or kHalf
  /// (filters streamed from a checkpoint are converted while streaming;
  /// XNNPACK runs fp32 x fp16 -> fp32). Biases stay fp32.
  ScalarType fc_filter_dtype = ScalarType::kFloat;
};

/// Rewrites `g` in place: every maximal run (in node order) of claimable nodes
/// becomes one DelegateCall over a new Graph::delegates() entry. Weights of
/// FullyConnected nodes are streamed once to compute their SHA-256 keys.
Result<PartitionStats> partition_for_xnnpack(graph::Graph& g, const PartitionOptions& options = {});

}  // namespace hf2pte::xnn
