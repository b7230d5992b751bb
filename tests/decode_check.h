// The KV-cache decode check shared by the end-to-end suites: prefill the
// fixture's input_ids, then one token per call at the next cache_position;
// every step's logits must be within `atol` of greedy_step_logits.npy and the
// argmax ids must equal greedy.npy exactly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/program.h"

namespace hf2pte::test {

/// `forward` of `pte_path` on `ids` [1, T] at positions 0..T-1 (one call; a
/// program without a KV cache gets input_ids only); the logits output, or
/// nullopt after recording the failure.
std::optional<HostTensor> run_full_sequence(const std::string& pte_path, const std::vector<int64_t>& ids,
                                            const rt::KernelRegistry& kernels);

/// Runs `forward` of `pte_path` on the fixture's input_ids at positions 0..T-1
/// and expects logits [1, T, V] within `atol` of logits.npy; returns max |diff|.
double expect_full_sequence_logits(const std::string& fixture_dir, const std::string& pte_path,
                                   const rt::KernelRegistry& kernels, double atol);

/// Checks `pte_path` (exported from fixture folder `fixture_dir`) with gtest
/// expectations; returns the worst step-logit difference (for RecordProperty).
double expect_decode_reproduces_greedy(const std::string& fixture_dir, const std::string& pte_path,
                                       const rt::KernelRegistry& kernels, double atol);

}  // namespace hf2pte::test
