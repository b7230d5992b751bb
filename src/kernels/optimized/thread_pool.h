// A tiny persistent thread pool for the optimized kernels. Decode runs ~100
// small kernels per token (50-200 us each), so waking threads through a
// condition variable per call would cost a visible share; workers spin briefly
// on an atomic generation counter and then sleep in std::atomic::wait.
#pragma once

#include <cstdint>
#include <functional>

namespace hf2pte::kernels {

/// Splits [0, n) into at most threads() contiguous chunks whose bounds are
/// multiples of `grain` (except the end) and runs fn(begin, end) on each, the
/// calling thread taking the first. Runs inline when n <= grain or one thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

/// Threads parallel_for uses (>= 1).
int pool_threads();
void set_pool_threads(int threads);

}  // namespace hf2pte::kernels
