// Which HQQ tile step runs (hqq_simd.h): the best the CPU has, checked once;
// tests force lower ones to compare their bytes.
#include <algorithm>
#include <atomic>

#include "quant/hqq_simd.h"

namespace hf2pte::quant {

namespace {
std::atomic<int> g_forced{-1};
}  // namespace

HqqIsa hqq_best_isa() {
  static const HqqIsa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return HqqIsa::kAvx512;
    if (__builtin_cpu_supports("avx2")) return HqqIsa::kAvx2;
    return HqqIsa::kScalar;
  }();
  return best;
}

HqqIsa hqq_isa() {
  const int forced = g_forced.load();
  return forced < 0 ? hqq_best_isa() : HqqIsa(forced);
}

HqqIsa set_hqq_isa(HqqIsa isa) {
  const HqqIsa was = hqq_isa();
  g_forced.store(int(std::min(isa, hqq_best_isa())));
  return was;
}

}  // namespace hf2pte::quant
