// Memory planning: every tensor that lives in the arena gets an offset such
// that tensors alive at the same time never overlap. Sizes are upper bounds
// (symbolic dims at their max), so any runtime shape within bounds fits.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "export/export_config.h"
#include "graph/graph.h"

namespace hf2pte::exp {

struct MemoryPlan {
  static constexpr uint64_t kAlignment = 16;
  std::unordered_map<graph::ValueId, uint64_t> offsets;  ///< arena offset (memory_id 1)
  uint64_t arena_size = 0;
  uint64_t sum_of_sizes = 0;  ///< what planning without reuse would need
};

/// Greedy best-fit by size over lifetime intervals [definition, last use].
/// Inputs, outputs and buffers are planned only when the config says so.
Result<MemoryPlan> plan_memory(const graph::Graph& g, const ExportConfig& config);

}  // namespace hf2pte::exp
