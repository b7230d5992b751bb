// Decomposition rules: functional ops builders emit, rewritten into kernel ops.
// Each rule is scoped to the backends that lack the op (tinygrad's
// capability-driven rewrites); see docs/pipeline.md.
#pragma once

#include <vector>

#include "export/export_config.h"
#include "export/rewrite.h"

namespace hf2pte::exp {

/// A named group of rules, chosen by what a backend lacks (docs/pipeline.md).
struct RuleSet {
  const char* name;  ///< "fused", "all", "cuda-only"
  std::vector<Rule> rules;
};

/// The rule sets that apply for `backend`, in priority order.
std::vector<RuleSet> decomposition_rule_sets(Backend backend);

/// The rules of decomposition_rule_sets(backend), flattened in priority order.
std::vector<Rule> decomposition_rules(Backend backend);

}  // namespace hf2pte::exp
