// Per-op time of an LLM program's decode steps: every kernel of a registry
// wrapped with a timer (a profiling registry), so the hot ops show without
// perf (hardware counters are unavailable on this KVM guest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/kernel.h"

namespace hf2pte::bench {

struct OpTime {
  std::string key;  ///< "aten::mm.out"
  uint64_t calls = 0;
  double seconds = 0;
};

struct OpProfile {
  std::vector<OpTime> ops;  ///< sorted by time, largest first
  double total_seconds = 0; ///< wall time of the profiled decode steps
  int steps = 0;
};

/// Runs a prefill of `prompt_len` tokens, then times every kernel call of
/// `gen` decode steps through `kernels` wrapped with timers (with
/// `time_prefill`, the prefill itself is timed instead: one step).
Result<OpProfile> profile_decode(const std::string& pte_path, int prompt_len, int gen, const rt::KernelRegistry& kernels,
                                 bool time_prefill = false);

}  // namespace hf2pte::bench
