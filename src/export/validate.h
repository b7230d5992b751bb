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

/// Relative validation tolerances (see validate_export).
inline constexpr double kFp32Tolerance = 1e-4;
inline constexpr double kFp16WeightsTolerance = 1e-2;

/// Runs every method of `unlowered` through the reference interpreter and the
/// program at `pte_path` through the runtime with the portable kernels, on
/// deterministic sample inputs (LLM contract: token ids below the vocabulary
/// size, cache_position 0..S-1), and compares all outputs within
/// `rel_tolerance` x max(1, max |reference|): 1e-4 covers fp32 summation
/// orders; fp16 linear weights (rounding of 2^-11 per weight) need more.
Result<ValidationResult> validate_export(const graph::Program& unlowered, const std::string& pte_path,
                                         double rel_tolerance = kFp32Tolerance);

}  // namespace hf2pte::exp
