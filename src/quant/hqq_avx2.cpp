// AVX2 HQQ tile step: see hqq_simd.h. The avx512 step's 16 lanes as two
// 8-lane halves, compiled with -mavx2 and without fused multiply-adds; every
// instruction is an IEEE float32 operation that the scalar path in quant.cpp
// performs in the same order, so the bytes are the same on every CPU.
#include <immintrin.h>

#include <limits>

#include "quant/hqq_simd.h"

namespace hf2pte::quant {

namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/// Lanes [8 h, 8 h + 8) of the tile (w rows are 16 floats apart).
template <class T>
__m256 half_step(const T* w, int64_t bs, __m256 lo, __m256 hi, float* s) {
  const __m256 eps = _mm256_set1_ps(std::numeric_limits<float>::epsilon());
  const __m256 scale = _mm256_loadu_ps(s);
  __m256 num = _mm256_setzero_ps(), den = _mm256_setzero_ps();
  for (int64_t i = 0; i < bs; ++i) {
    const __m256 x = load8(w + i * 16);
    __m256 q = _mm256_round_ps(_mm256_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_min_ps(_mm256_max_ps(q, lo), hi);
    num = _mm256_add_ps(num, _mm256_mul_ps(x, q));
    den = _mm256_add_ps(den, _mm256_mul_ps(q, q));
  }
  const __m256 solvable = _mm256_cmp_ps(den, _mm256_setzero_ps(), _CMP_GT_OQ);
  __m256 next = _mm256_blendv_ps(scale, _mm256_div_ps(num, den), solvable);
  next = abs8(_mm256_max_ps(next, eps));
  const __m256 rel = _mm256_div_ps(abs8(_mm256_sub_ps(next, scale)), _mm256_max_ps(scale, eps));
  _mm256_storeu_ps(s, next);
  return rel;
}

template <class T>
float tile_step(const T* w, int64_t bs, int32_t qmin, int32_t qmax, float* s) {
  const __m256 lo = _mm256_set1_ps(float(qmin)), hi = _mm256_set1_ps(float(qmax));
  alignas(32) float r[16];
  _mm256_store_ps(r, half_step(w, bs, lo, hi, s));
  _mm256_store_ps(r + 8, half_step(w + 8, bs, lo, hi, s + 8));
  // Largest lane, as the scalar path's running vmax(m, x) from m = 0 finds it.
  float m = 0.0f;
  for (float x : r) m = m > x ? m : x;
  return m;
}

template <class T>
void tile_quantize(const T* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q) {
  const __m256 lo = _mm256_set1_ps(float(qmin)), hi = _mm256_set1_ps(float(qmax));
  const __m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
  alignas(32) int32_t v[16];
  for (int64_t i = 0; i < bs; ++i) {
    const __m256 q0 = _mm256_round_ps(_mm256_div_ps(load8(w + i * 16), s0), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 q1 = _mm256_round_ps(_mm256_div_ps(load8(w + i * 16 + 8), s1), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(q0, lo), hi)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(v + 8), _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(q1, lo), hi)));
    for (int lane = 0; lane < 16; ++lane) q[lane * bs + i] = int8_t(v[lane]);
  }
}

}  // namespace

void hqq_tile_quantize_avx2(const float* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q) {
  tile_quantize(w, bs, qmin, qmax, s, q);
}
void hqq_tile_quantize_avx2(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q) {
  tile_quantize(w, bs, qmin, qmax, s, q);
}

float hqq_tile_step_avx2(const float* w, int64_t bs, int32_t qmin, int32_t qmax, float* s) {
  return tile_step(w, bs, qmin, qmax, s);
}
float hqq_tile_step_avx2(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, float* s) {
  return tile_step(w, bs, qmin, qmax, s);
}

}  // namespace hf2pte::quant
