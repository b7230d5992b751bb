// The SIMD tile steps of HQQ (hqq_avx512.cpp, hqq_avx2.cpp): 16 blocks at
// once, one per lane, with exactly the scalar path's float32 operations
// (quant.cpp), so every ISA gives the same bytes. Internal to src/quant.
#pragma once

#include <cstdint>

namespace hf2pte::quant {

enum class HqqIsa { kScalar, kAvx2, kAvx512 };

/// The best ISA this CPU runs the tile step on (checked once).
HqqIsa hqq_best_isa();
/// The ISA quantize_weight uses now: the best, unless a test forced a lower one.
HqqIsa hqq_isa();
/// Forces `isa` (clamped to the best this CPU has); returns the previous setting.
HqqIsa set_hqq_isa(HqqIsa isa);

/// One HQQ step of 16 blocks: w[i * 16 + lane] is element i of lane's block
/// (bs elements), s[16] their scales, updated in place. Returns the largest
/// relative change |s' - s| / max(s, eps) over the lanes.
float hqq_tile_step_avx512(const float* w, int64_t bs, int32_t qmin, int32_t qmax, float* s);
/// The same with the weights as bf16 bits (widened exactly).
float hqq_tile_step_avx512(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, float* s);
float hqq_tile_step_avx2(const float* w, int64_t bs, int32_t qmin, int32_t qmax, float* s);
float hqq_tile_step_avx2(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, float* s);

/// The final integers of a tile: q[lane * bs + i] = clamp(round(w[i * 16 + lane] / s[lane]))
/// (the scalar path's division and rounding, so the same bytes).
void hqq_tile_quantize_avx512(const float* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q);
void hqq_tile_quantize_avx512(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q);
void hqq_tile_quantize_avx2(const float* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q);
void hqq_tile_quantize_avx2(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q);

}  // namespace hf2pte::quant
