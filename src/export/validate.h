// Validation that every export runs: the unlowered graph in the reference
// interpreter versus the written program in our runtime, on sample inputs.
#pragma once

#include <optional>
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
/// Programs with dynamically quantized activations (8da...) that miss the
/// fake-quantized reference by more than the float tolerance still pass within
/// this share of how far the recipe moves the model (max |fake-quantized -
/// float|): one activation rounded to its other neighbour at a tie by a
/// different float order (see validate.cpp; the report says which bound held).
/// Weight-only recipes have no data-dependent rounding and get no such bound.
inline constexpr double kRoundingFlipShare = 1.0;
/// 16-bit programs (--dtype bf16 / fp16) against the fp32 model, relative to
/// max(1, max |fp32 output|) (docs/decisions.md, "Half-precision programs").
/// About 8 unit roundoffs: 8 x 2^-8 (bf16) and 8 x 2^-11 (fp16).
inline constexpr double kBf16ModelTolerance = 3e-2;
inline constexpr double kFp16ModelTolerance = 4e-3;
/// 16-bit programs with XNNPACK delegates against their own 16-bit graph: a
/// delegate sums in another order than the portable kernel, so a result can
/// round to the neighbouring 16-bit value and carry that one step on; 4 unit
/// roundoffs (4 x 2^-8, 4 x 2^-11) bound what such flips add up to.
inline constexpr double kBf16KernelTolerance = 1.6e-2;
inline constexpr double kFp16KernelTolerance = 2e-3;

/// Runs every method of `unlowered` through the reference interpreter and the
/// program at `pte_path` through the runtime with the portable kernels, on
/// deterministic sample inputs (LLM contract: token ids below the vocabulary
/// size, cache_position 0..S-1), and compares all outputs within
/// `rel_tolerance` x max(1, max |reference|): 1e-4 covers fp32 summation
/// orders; fp16 linear weights (rounding of 2^-11 per weight) need more.
/// `float_model` (quantized exports): the model before quantization. `unlowered`
/// is then the fake-quantized graph, which the program must match within the
/// tolerance (it proves the kernels compute the recipe); the report also states,
/// per output, the max |diff| to the float model and the top-1 agreement over
/// the sample positions (how much the recipe moves the outputs; a failure only
/// when `float_model_tolerance` is given: 16-bit programs must stay within it,
/// relative to max(1, max |float output|)).
Result<ValidationResult> validate_export(const graph::Program& unlowered, const std::string& pte_path,
                                         double rel_tolerance = kFp32Tolerance,
                                         const graph::Program* float_model = nullptr,
                                         std::optional<double> float_model_tolerance = std::nullopt);

}  // namespace hf2pte::exp
