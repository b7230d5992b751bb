// Test helper shared by the export suites.
#pragma once

#include "pte/program_generated.h"

namespace hf2pte::exp {

// An independent check of the memory plan: lifetimes are recomputed from the
// emitted instructions (not from the planner's graph view), and any two planned
// tensors that are live at the same instruction must not share bytes.
/// Also checks every planned tensor lies inside memory id 1.
void expect_no_live_overlap(const executorch_flatbuffer::ExecutionPlanT& ep);

}  // namespace hf2pte::exp
