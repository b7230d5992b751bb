// The export pipeline: graph::Program -> .pte contents, stage by stage in the
// seed's order (see pipeline.cpp for the order and why).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "export/export_config.h"
#include "export/stages.h"
#include "graph/graph.h"
#include "pte/pte_writer.h"

namespace hf2pte::exp {

/// Stage names accepted by --dump-graph, in order.
const std::vector<std::string>& pipeline_stage_names();

struct PipelineHooks {
  /// Called after each stage with the program as it stands (for --dump-graph).
  std::function<void(std::string_view stage, const graph::Program&, const StageLog&)> after_stage;
};

/// Runs stages 1-8 and returns what the writer needs.
Result<pte::PteContents> run_pipeline(graph::Program& program, const ExportConfig& config, StageLog& log,
                                      const PipelineHooks& hooks = {});

}  // namespace hf2pte::exp
