// AVX-512 HQQ tile step: see hqq_simd.h. Compiled with -mavx512f and without
// fused multiply-adds; every instruction is an IEEE float32 operation that the
// scalar path in quant.cpp performs in the same order.
#include <immintrin.h>

#include <limits>

#include "quant/hqq_simd.h"

namespace hf2pte::quant {

namespace {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

template <class T>
float tile_step(const T* w, int64_t bs, int32_t qmin, int32_t qmax, float* s) {
  const __m512 eps = _mm512_set1_ps(std::numeric_limits<float>::epsilon());
  const __m512 lo = _mm512_set1_ps(float(qmin)), hi = _mm512_set1_ps(float(qmax));
  const __m512 scale = _mm512_loadu_ps(s);
  __m512 num = _mm512_setzero_ps(), den = _mm512_setzero_ps();
  for (int64_t i = 0; i < bs; ++i) {
    const __m512 x = load16(w + i * 16);
    __m512 q = _mm512_roundscale_ps(_mm512_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm512_min_ps(_mm512_max_ps(q, lo), hi);
    num = _mm512_add_ps(num, _mm512_mul_ps(x, q));
    den = _mm512_add_ps(den, _mm512_mul_ps(q, q));
  }
  const __mmask16 solvable = _mm512_cmp_ps_mask(den, _mm512_setzero_ps(), _CMP_GT_OQ);
  __m512 next = _mm512_mask_div_ps(scale, solvable, num, den);
  next = _mm512_abs_ps(_mm512_max_ps(next, eps));
  const __m512 rel = _mm512_div_ps(_mm512_abs_ps(_mm512_sub_ps(next, scale)), _mm512_max_ps(scale, eps));
  _mm512_storeu_ps(s, next);
  // Largest lane, as the scalar path's running vmax(m, x) from m = 0 finds it.
  alignas(64) float r[16];
  _mm512_store_ps(r, rel);
  float m = 0.0f;
  for (float x : r) m = m > x ? m : x;
  return m;
}

template <class T>
void tile_quantize(const T* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q) {
  const __m512 lo = _mm512_set1_ps(float(qmin)), hi = _mm512_set1_ps(float(qmax));
  const __m512 scale = _mm512_loadu_ps(s);
  alignas(64) int32_t v[16];
  for (int64_t i = 0; i < bs; ++i) {
    const __m512 x = _mm512_roundscale_ps(_mm512_div_ps(load16(w + i * 16), scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_store_si512(v, _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(x, lo), hi)));
    for (int lane = 0; lane < 16; ++lane) q[lane * bs + i] = int8_t(v[lane]);
  }
}

}  // namespace

void hqq_tile_quantize_avx512(const float* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q) {
  tile_quantize(w, bs, qmin, qmax, s, q);
}
void hqq_tile_quantize_avx512(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, const float* s, int8_t* q) {
  tile_quantize(w, bs, qmin, qmax, s, q);
}

float hqq_tile_step_avx512(const float* w, int64_t bs, int32_t qmin, int32_t qmax, float* s) {
  return tile_step(w, bs, qmin, qmax, s);
}
float hqq_tile_step_avx512(const uint16_t* w, int64_t bs, int32_t qmin, int32_t qmax, float* s) {
  return tile_step(w, bs, qmin, qmax, s);
}

}  // namespace hf2pte::quant
