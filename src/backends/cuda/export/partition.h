// The CUDA partitioner (export stage 6 for --backend cuda). As upstream's
// CudaPartitioner, a method whose every node the delegate supports becomes one
// delegate; otherwise each maximal run of supported nodes becomes one, and the
// ops left on the portable kernels are reported by name (a warning).
// The payload format is ours: schema/cuda_payload.fbs, docs/cuda.md.
#pragma once

#include <map>
#include <string>

#include "backends/cuda/schema/backend_id.h"
#include "core/status.h"
#include "graph/graph.h"

namespace hf2pte::cuda {

struct CudaPartitionStats {
  int partitions = 0;
  int claimed_nodes = 0;
  uint64_t arena_bytes = 0;                   ///< intermediates of every partition
  std::map<std::string, int> unsupported;     ///< op kernel key -> nodes left outside
};

/// Rewrites `g` in place: every maximal run (in node order) of supported
/// nodes becomes one DelegateCall whose payload holds the run's nodes, its
/// intermediates' arena plan and its weights as named data.
Result<CudaPartitionStats> partition_for_cuda(graph::Graph& g);

}  // namespace hf2pte::cuda
