// The CPU reference executor of CUDA payloads: runs each node on the kernel
// registry's CPU kernels (portable semantics: f32 arithmetic, one rounding to
// bf16/f16 per result), with the same arena, state and I/O rules as the
// device executor. Export validates every CUDA program through it, and
// `hf2pte run/generate` use it on machines without a GPU (with a warning).
#pragma once

#include <memory>
#include <span>

#include "backends/cuda/runtime/cuda_program.h"
#include "backends/cuda/runtime/device.h"
#include "core/status.h"
#include "runtime/evalue.h"
#include "runtime/kernel.h"

namespace hf2pte::cuda {

class ReferenceExecutor {
 public:
  /// Resolves every node's kernel in `registry` (copied) and every constant
  /// through `constants` (sizes checked), allocates the arena.
  static Result<std::unique_ptr<ReferenceExecutor>> make(std::shared_ptr<const CudaProgram> program,
                                                         const ConstantLookup& constants,
                                                         const rt::KernelRegistry& registry);
  ~ReferenceExecutor();
  /// `args`: the DelegateCall's tensors, inputs then outputs (outputs are
  /// resized to the computed sizes). State inputs are updated in place.
  Status execute(std::span<rt::EValue*> args);

 private:
  ReferenceExecutor() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hf2pte::cuda
