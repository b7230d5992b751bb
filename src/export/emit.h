// Emission: graph IR + memory plan -> the .pte object tree (ProgramT) and the
// blobs (constants, initial buffer values) that the writer streams to disk.
#pragma once

#include <vector>

#include "export/memory_plan.h"
#include "graph/graph.h"
#include "pte/pte_writer.h"

namespace hf2pte::exp {

/// Emits every method of `program` (with its memory plan, same order) and the
/// constant methods, following ExecuTorch 1.3.x conventions (docs/pte-format.md).
Result<pte::PteContents> emit_program(const graph::Program& program, const std::vector<MemoryPlan>& plans);

}  // namespace hf2pte::exp
