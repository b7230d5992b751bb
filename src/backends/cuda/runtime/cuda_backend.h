// The CUDA delegate backend ("Hf2pteCudaBackend"): runs our CUDA payloads
// (docs/cuda.md) on the GPU through the device executor, or on the CPU
// reference executor where no device can run them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"

namespace hf2pte::cuda {

/// Where delegates loaded from now on execute.
enum class ExecutorChoice {
  kAuto,       ///< the device when one can run payloads, else the CPU reference (with a warning)
  kDevice,     ///< the device, or the load fails naming why there is none
  kReference,  ///< the CPU reference executor, silently (export validation, tests)
};
/// Process-wide; HF2PTE_CUDA_EXECUTOR=auto|device|reference sets the initial value.
void set_executor_choice(ExecutorChoice c);
ExecutorChoice executor_choice();

/// Registers the backend under its id in the process-wide registry.
/// Idempotent and thread-safe.
Status register_cuda_backend();

/// Which executor the last delegate loaded in this process uses: "device
/// (NVIDIA H200 ...)" or "cpu reference (<why no device>)". For `bench`/`run` output.
std::string last_executor_description();

}  // namespace hf2pte::cuda

namespace hf2pte::cuda {

/// Op kernel key -> node count of a CUDA payload ({"aten::mm.out", 154}),
/// for `hf2pte inspect`.
Result<std::vector<std::pair<std::string, size_t>>> cuda_node_counts(std::span<const uint8_t> payload);

}  // namespace hf2pte::cuda
