// Validation that every export runs: the unlowered graph in the reference
// interpreter versus the written program in our runtime, on sample inputs.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "graph/graph.h"

namespace hf2pte::exp {

struct ValidationResult {
  bool ok = true;
  std::string message;          ///< why it failed (empty when ok)
  nlohmann::ordered_json report;  ///< per method and output: max |diff|, tolerance, sample length
};

/// Runs every method of `unlowered` through the reference interpreter and the
/// program at `pte_path` through the runtime with the portable kernels, on
/// deterministic sample inputs (LLM contract: token ids below the vocabulary
/// size, cache_position 0..S-1), and compares all outputs.
Result<ValidationResult> validate_export(const graph::Program& unlowered, const std::string& pte_path);

}  // namespace hf2pte::exp
