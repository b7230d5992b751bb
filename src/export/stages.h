// The pipeline stages, one file each, in the seed's order. pipeline.cpp owns
// the order; every stage returns a one-line account of what it did.
#pragma once

#include <string>
#include <vector>

#include "export/export_config.h"
#include "export/memory_plan.h"
#include "graph/graph.h"

namespace hf2pte::exp {

/// Messages a stage reports (shown with --verbose) and warnings (always shown).
struct StageLog {
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

/// 1. Backend preparation: checks the backend and dtype are available.
Status prepare_backend(graph::Program& p, const ExportConfig& c, StageLog& log);
/// 1b. Quantization (--qlinear / --qembedding, export/quantize.cpp): linears and
/// embeddings become upstream's quantized ops, the weights quantized as they stream.
Status quantize_program(graph::Program& p, const ExportConfig& c, StageLog& log);
/// 2. Decompositions: fixed-point rewrite with the backend's rule set.
Status run_decompositions(graph::Program& p, const ExportConfig& c, StageLog& log);
/// 3. Program fixes: cap unbounded dims, drop runtime asserts, check constant metadata.
Status run_program_fixes(graph::Program& p, const ExportConfig& c, StageLog& log);
/// 4. Node fixes: normalise negative dims.
Status run_node_fixes(graph::Program& p, const ExportConfig& c, StageLog& log);
/// 5. Verification: kernel op set, definitions before uses, shapes re-inferred.
Status verify_program(const graph::Program& p, const ExportConfig& c, StageLog& log);
/// 6. Partitioning: hands supported subgraphs to the backend.
Status run_partitioner(graph::Program& p, const ExportConfig& c, StageLog& log);
/// 7. Memory planning (one plan per method).
Result<std::vector<MemoryPlan>> run_memory_planning(const graph::Program& p, const ExportConfig& c, StageLog& log);

/// The cap the seed applies to an unbounded dim (item 33):
/// max(lower*4, hint*4, floor), floor = clamp(round(2^24^(1/N)), 64, 1024).
int64_t unbounded_dim_cap(int64_t lower, int64_t hint, int num_unbounded);

}  // namespace hf2pte::exp
