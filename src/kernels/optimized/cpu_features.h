// CPU feature checks the kernel tables share. GCC and Clang spell most
// features for __builtin_cpu_supports alike; F16C Clang 14 does not know, so it
// is read from CPUID (leaf 1, ECX bit 29) directly.
#pragma once

#include <cpuid.h>

namespace hf2pte::kernels {

/// AVX2, FMA and F16C: what the avx2 tables are compiled for.
inline bool cpu_has_avx2_fma_f16c() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace hf2pte::kernels
