// The AVX-512 tile step of HQQ (hqq_avx512.cpp): 16 blocks at once, one per
// lane, with exactly the scalar path's float32 operations (quant.cpp), so both
// give the same bytes. Internal to src/quant.
#pragma once

#include <cstdint>

namespace hf2pte::quant {

/// True when the CPU runs the AVX-512 step (checked once).
bool hqq_simd_available();
/// Forces the scalar path (tests compare the two); returns the previous setting.
bool set_hqq_simd(bool enabled);

/// One HQQ step of 16 blocks: w[i * 16 + lane] is element i of lane's block
/// (bs elements), s[16] their scales, updated in place. Returns the largest
/// relative change |s' - s| / max(s, eps) over the lanes.
float hqq_tile_step_avx512(const float* w, int64_t bs, int32_t qmin, int32_t qmax, float* s);
/// The same with the weights as bf16 bits (widened exactly).
float hqq_tile_step_avx512(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, float* s);

}  // namespace hf2pte::quant
