// Optimized CPU kernels: the ops LLM inference spends its time in, replacing
// the portable reference kernels where they are measurably faster. Everything
// else falls through to the portable kernels (same semantics, same errors).
#pragma once

#include "runtime/kernel.h"

namespace hf2pte::kernels {

/// Registers the optimized kernels over whatever `registry` holds (call after
/// register_portable_kernels).
void register_optimized_kernels(rt::KernelRegistry& registry);

/// Portable kernels with the optimized ones layered on top: what `hf2pte run`,
/// `generate` and `bench` use. Built once.
const rt::KernelRegistry& optimized_registry();

/// Threads the optimized kernels may use (default: all cores). Not thread-safe
/// with respect to running methods; set it before executing.
void set_kernel_threads(int threads);

}  // namespace hf2pte::kernels

namespace hf2pte {
using kernels::optimized_registry;
}  // namespace hf2pte
