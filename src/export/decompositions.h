// Decomposition rules: functional ops builders emit, rewritten into kernel ops.
// Each rule is scoped to the backends that lack the op (tinygrad's
// capability-driven rewrites); see docs/pipeline.md.
#pragma once

#include <vector>

#include "export/export_config.h"
#include "export/rewrite.h"

namespace hf2pte::exp {

/// The rules that apply for `backend`, in priority order.
std::vector<Rule> decomposition_rules(Backend backend);

}  // namespace hf2pte::exp
