// The one file that owns pass order (docs/STYLE.md rule 6). The order is the
// seed's: transformers' ExecuTorch exporter prepares the backend, patches ops
// during tracing (our decompositions), fixes the program and its nodes,
// verifies against the core op set, partitions, plans memory, serializes.
#include "export/pipeline.h"

#include "export/decompositions.h"
#include "export/emit.h"

namespace hf2pte::exp {

const std::vector<std::string>& pipeline_stage_names() {
  static const std::vector<std::string> kNames = {"build", "prepare", "quantize", "decompose", "program-fixes",
                                                  "node-fixes", "verify", "partition", "memory-plan"};
  return kNames;
}

Result<pte::PteContents> run_pipeline(graph::Program& p, const ExportConfig& c, StageLog& log, const PipelineHooks& hooks) {
  auto after = [&](std::string_view stage) {
    if (hooks.after_stage) hooks.after_stage(stage, p, log);
  };
  after("build");
  // 1. Backend first: it decides which rules apply and fails fast on unsupported targets.
  HF2PTE_RETURN_IF_ERROR(prepare_backend(p, c, log));
  after("prepare");
  // 1b. Quantize before tracing further, as torchao's quantize_ runs on the eager model.
  HF2PTE_RETURN_IF_ERROR(quantize_program(p, c, log));
  after("quantize");
  // 2. Decompositions before any fix: fixes and verification see kernel ops only.
  HF2PTE_RETURN_IF_ERROR(run_decompositions(p, c, log));
  after("decompose");
  // 3. Program fixes need the final dims (range capping) before sizes are bounded.
  HF2PTE_RETURN_IF_ERROR(run_program_fixes(p, c, log));
  after("program-fixes");
  // 4. Node fixes canonicalise arguments the kernels and partitioners expect.
  HF2PTE_RETURN_IF_ERROR(run_node_fixes(p, c, log));
  after("node-fixes");
  // 5. Verify before partitioning: a broken graph fails here with the node named.
  HF2PTE_RETURN_IF_ERROR(verify_program(p, c, log));
  after("verify");
  // 6. Partition: delegated subgraphs leave the planner's view.
  HF2PTE_RETURN_IF_ERROR(run_partitioner(p, c, log));
  after("partition");
  // 7. Memory plan over the final node order.
  HF2PTE_ASSIGN_OR_RETURN(auto plans, run_memory_planning(p, c, log));
  after("memory-plan");
  // 8. Emit the object tree; the writer streams it and the constants to disk.
  return emit_program(p, plans);
}

}  // namespace hf2pte::exp
