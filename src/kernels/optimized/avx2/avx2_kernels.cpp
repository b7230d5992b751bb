// AVX2 + FMA + F16C versions of the SimdKernels loops: the table for x86 CPUs
// without AVX-512 (AMD Zen 2/3, Intel client cores). This file is the whole
// hf2pte_kernels_optimized_avx2 library, compiled with -mavx2 -mfma -mf16c
// only; simd() calls it only after __builtin_cpu_supports says yes. The
// loops are the avx512 table's at 8 lanes: the same streams, the same
// polynomials, tails through maskload/maskstore.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/scalar_type.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/stream_prefetch.h"

namespace hf2pte::kernels {

namespace avx2 {
namespace {

/// Lane mask of the first min(left, 8) lanes (left > 0), for maskload/maskstore.
inline __m256i tail_mask(int64_t left) {
  alignas(32) static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t n = std::min<int64_t>(left, 8);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - n));
}

inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float reduce_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Decode GEMV, x[1,K] . W[K,N]: four rows of W per pass as four sequential
// streams into a y tile kept in L1 (the avx512 loop at 8 lanes).
void gemv(const float* x, const float* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  constexpr int64_t kTile = 2048;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
    const int64_t t1 = std::min(n1, t0 + kTile);
    for (int64_t n = t0; n < t1; n += 8) {
      const __m256i m = tail_mask(t1 - n);
      _mm256_maskstore_ps(y + n, m, bias ? _mm256_maskload_ps(bias + n, m) : _mm256_setzero_ps());
    }
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const __m256 x0 = _mm256_set1_ps(x[k]), x1 = _mm256_set1_ps(x[k + 1]);
      const __m256 x2 = _mm256_set1_ps(x[k + 2]), x3 = _mm256_set1_ps(x[k + 3]);
      const float* r0 = w + k * ldw;
      const float* r1 = r0 + ldw;
      const float* r2 = r1 + ldw;
      const float* r3 = r2 + ldw;
      int64_t n = t0;
      for (; n + 16 <= t1; n += 16) {
        __m256 a = _mm256_loadu_ps(y + n), b = _mm256_loadu_ps(y + n + 8);
        a = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r0 + n), a);
        b = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r0 + n + 8), b);
        a = _mm256_fmadd_ps(x1, _mm256_loadu_ps(r1 + n), a);
        b = _mm256_fmadd_ps(x1, _mm256_loadu_ps(r1 + n + 8), b);
        a = _mm256_fmadd_ps(x2, _mm256_loadu_ps(r2 + n), a);
        b = _mm256_fmadd_ps(x2, _mm256_loadu_ps(r2 + n + 8), b);
        a = _mm256_fmadd_ps(x3, _mm256_loadu_ps(r3 + n), a);
        b = _mm256_fmadd_ps(x3, _mm256_loadu_ps(r3 + n + 8), b);
        _mm256_storeu_ps(y + n, a);
        _mm256_storeu_ps(y + n + 8, b);
      }
      for (; n < t1; n += 8) {
        const __m256i m = tail_mask(t1 - n);
        __m256 a = _mm256_maskload_ps(y + n, m);
        a = _mm256_fmadd_ps(x0, _mm256_maskload_ps(r0 + n, m), a);
        a = _mm256_fmadd_ps(x1, _mm256_maskload_ps(r1 + n, m), a);
        a = _mm256_fmadd_ps(x2, _mm256_maskload_ps(r2 + n, m), a);
        a = _mm256_fmadd_ps(x3, _mm256_maskload_ps(r3 + n, m), a);
        _mm256_maskstore_ps(y + n, m, a);
      }
    }
    for (; k < K; ++k) {
      const __m256 xk = _mm256_set1_ps(x[k]);
      const float* r = w + k * ldw;
      for (int64_t n = t0; n < t1; n += 8) {
        const __m256i m = tail_mask(t1 - n);
        _mm256_maskstore_ps(y + n, m, _mm256_fmadd_ps(xk, _mm256_maskload_ps(r + n, m), _mm256_maskload_ps(y + n, m)));
      }
    }
  }
}

/// 8 floats, or 8 halfs widened to floats (vcvtph2ps).
inline __m256 load_row(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_row(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline float scalar(float v) { return v; }
inline float scalar(uint16_t v) { return half_to_float(v); }

/// gemv_t's row loop for fp32 or fp16 rows: four accumulators per row, the
/// tail in scalar code. Rows go in pairs, two streams in flight (4 % more
/// read bandwidth than one row at a time on Zen 3, median of 12 alternating
/// runs); each row's arithmetic is the single-row loop's, so results are the same.
template <typename T>
void dot_rows(const float* x, const T* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  const int64_t K32 = K / 32 * 32;
  for (; n0 + 2 <= n1 && K32 == K; n0 += 2) {
    const T* r0 = w + n0 * ldw;
    const T* r1 = r0 + ldw;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t k = 0; k < K32; k += 32) {
      prefetch_page_ahead(r0 + k, 32 * sizeof(T));
      prefetch_page_ahead(r1 + k, 32 * sizeof(T));
      const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
      const __m256 x2 = _mm256_loadu_ps(x + k + 16), x3 = _mm256_loadu_ps(x + k + 24);
      a0 = _mm256_fmadd_ps(x0, load_row(r0 + k), a0);
      b0 = _mm256_fmadd_ps(x0, load_row(r1 + k), b0);
      a1 = _mm256_fmadd_ps(x1, load_row(r0 + k + 8), a1);
      b1 = _mm256_fmadd_ps(x1, load_row(r1 + k + 8), b1);
      a2 = _mm256_fmadd_ps(x2, load_row(r0 + k + 16), a2);
      b2 = _mm256_fmadd_ps(x2, load_row(r1 + k + 16), b2);
      a3 = _mm256_fmadd_ps(x3, load_row(r0 + k + 24), a3);
      b3 = _mm256_fmadd_ps(x3, load_row(r1 + k + 24), b3);
    }
    y[n0] = reduce_add(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    y[n0 + 1] = reduce_add(_mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
  }
  for (int64_t n = n0; n < n1; ++n) {
    const T* row = w + n * ldw;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      prefetch_page_ahead(row + k, 32 * sizeof(T));
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), load_row(row + k), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), load_row(row + k + 8), a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), load_row(row + k + 16), a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), load_row(row + k + 24), a3);
    }
    for (; k + 8 <= K; k += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), load_row(row + k), a0);
    float s = reduce_add(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; k < K; ++k) s += x[k] * scalar(row[k]);
    y[n] = s;
  }
}

void gemv_t(const float* x, const float* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  dot_rows(x, w, y, K, ldw, n0, n1);
}

void gemv_t_f16(const float* x, const uint16_t* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  dot_rows(x, w, y, K, ldw, n0, n1);
}

void half_to_float_row(const uint16_t* w, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_row(w + i));
  for (; i < n; ++i) y[i] = half_to_float(w[i]);
}

void float_to_half_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = float_to_half(x[i]);
}

// exp(x) for x <= 0: 2^n * p(r), the avx512 table's Cephes polynomial; below
// -87.3 the result is 0. 2^n is built from the exponent bits (n >= -126).
__m256 exp_nonpos(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

void softmax_row(const float* x, float* y, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 mv = ninf;
  int nan = 0;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = tail_mask(n - i);
    const __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, k), _mm256_castsi256_ps(k));
    nan |= _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    mv = _mm256_max_ps(mv, v);
  }
  const float m = reduce_max(mv);
  if (nan != 0 || !std::isfinite(m)) {  // all -inf, +inf or NaN rows: the scalar path's semantics
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - m));
    for (int64_t i = 0; i < n; ++i) y[i] = float(y[i] / s);
    return;
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = tail_mask(n - i);
    const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(k), exp_nonpos(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm)));
    _mm256_maskstore_ps(y + i, k, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / reduce_add(sum));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, k, _mm256_mul_ps(_mm256_maskload_ps(y + i, k), inv));
  }
}

/// The 8 lane sums of v0..v7, in order: hadd folds pairs within 128-bit
/// lanes, the last step adds the two halves.
inline __m256 reduce8(__m256 v0, __m256 v1, __m256 v2, __m256 v3, __m256 v4, __m256 v5, __m256 v6, __m256 v7) {
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));  // rows 0-3, two halves
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v4, v5), _mm256_hadd_ps(v6, v7));  // rows 4-7
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/// a . row j of b (D = 8 or 16 floats, row j < rows; rows beyond are 0).
template <int D>
inline __m256 row_product(const __m256 (&av)[2], const float* b, int64_t j, int64_t rows) {
  if (j >= rows) return _mm256_setzero_ps();
  const float* r = b + j * D;
  if constexpr (D == 8) {
    return _mm256_mul_ps(av[0], _mm256_loadu_ps(r));
  } else {
    return _mm256_fmadd_ps(av[1], _mm256_loadu_ps(r + 8), _mm256_mul_ps(av[0], _mm256_loadu_ps(r)));
  }
}

// q . K^T for head_dim 8 or 16: 8 keys per block, reduced together.
template <int D>
void dot_rows_narrow_d(const float* a, const float* b, float* c, int64_t n) {
  const __m256 av[2] = {_mm256_loadu_ps(a), D == 16 ? _mm256_loadu_ps(a + 8) : _mm256_setzero_ps()};
  for (int64_t j = 0; j < n; j += 8) {
    const float* blk = b + j * D;
    const int64_t rows = std::min<int64_t>(8, n - j);
    const __m256 s = reduce8(row_product<D>(av, blk, 0, rows), row_product<D>(av, blk, 1, rows),
                             row_product<D>(av, blk, 2, rows), row_product<D>(av, blk, 3, rows),
                             row_product<D>(av, blk, 4, rows), row_product<D>(av, blk, 5, rows),
                             row_product<D>(av, blk, 6, rows), row_product<D>(av, blk, 7, rows));
    _mm256_maskstore_ps(c + j, tail_mask(rows), s);
  }
}

bool dot_rows_narrow(const float* a, const float* b, float* c, int64_t d, int64_t n) {
  if (d == 8) dot_rows_narrow_d<8>(a, b, c, n);
  else if (d == 16) dot_rows_narrow_d<16>(a, b, c, n);
  else return false;
  return true;
}

// p . V for head_dim 8 or 16: two accumulators per 8 lanes over the rows of b
// (even and odd rows), added at the end.
template <int D>
void axpy_rows_narrow_d(const float* a, const float* b, float* c, int64_t k) {
  constexpr int kV = D / 8;
  __m256 even[kV], odd[kV];
  for (int v = 0; v < kV; ++v) even[v] = odd[v] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 2 <= k; j += 2) {
    const __m256 c0 = _mm256_set1_ps(a[j]), c1 = _mm256_set1_ps(a[j + 1]);
    for (int v = 0; v < kV; ++v) {
      even[v] = _mm256_fmadd_ps(c0, _mm256_loadu_ps(b + j * D + 8 * v), even[v]);
      odd[v] = _mm256_fmadd_ps(c1, _mm256_loadu_ps(b + (j + 1) * D + 8 * v), odd[v]);
    }
  }
  if (j < k) {
    const __m256 c0 = _mm256_set1_ps(a[j]);
    for (int v = 0; v < kV; ++v) even[v] = _mm256_fmadd_ps(c0, _mm256_loadu_ps(b + j * D + 8 * v), even[v]);
  }
  for (int v = 0; v < kV; ++v) _mm256_storeu_ps(c + 8 * v, _mm256_add_ps(even[v], odd[v]));
}

bool axpy_rows_narrow(const float* a, const float* b, float* c, int64_t k, int64_t d) {
  if (d == 8) axpy_rows_narrow_d<8>(a, b, c, k);
  else if (d == 16) axpy_rows_narrow_d<16>(a, b, c, k);
  else return false;
  return true;
}

// 8 conditions per step: their bytes widened to lanes, nonzero selects s.
void select_row(const bool* c, const float* s, float o, float* y, int64_t n) {
  const __m256 ov = _mm256_set1_ps(o);
  const auto* bytes = reinterpret_cast<const uint8_t*>(c);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + i)));
    const __m256 off = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(_mm256_loadu_ps(s + i), ov, off));
  }
  for (; i < n; ++i) y[i] = bytes[i] != 0 ? s[i] : o;
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
inline __m256 is_nan(__m256 v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }
inline __m256 is_neg(__m256 v) { return _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ); }

// sigmoid(x) through e = exp(-|x|) <= 1: 1 / (1 + e) for x >= 0, e / (1 + e)
// below. NaN stays NaN.
/// 8 bf16 or f16 values widened to floats.
template <bool kBf16>
inline __m256 load8_h16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBf16) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_cvtph_ps(h);
  }
}

/// gemv's loop on 16-bit rows: four rows per pass, 16 columns per step, the
/// column tail in scalar code.
template <bool kBf16>
void gemv_h16(const float* x, const uint16_t* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0,
              int64_t n1) {
  auto widen1 = [](uint16_t v) { return kBf16 ? bf16_to_float(v) : half_to_float(v); };
  constexpr int64_t kTile = 2048;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
    const int64_t t1 = std::min(n1, t0 + kTile);
    for (int64_t n = t0; n < t1; ++n) y[n] = bias ? bias[n] : 0.0f;
    const int64_t v1 = t0 + (t1 - t0) / 16 * 16;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const __m256 x0 = _mm256_set1_ps(x[k]), x1 = _mm256_set1_ps(x[k + 1]);
      const __m256 x2 = _mm256_set1_ps(x[k + 2]), x3 = _mm256_set1_ps(x[k + 3]);
      const uint16_t* r0 = w + k * ldw;
      const uint16_t* r1 = r0 + ldw;
      const uint16_t* r2 = r1 + ldw;
      const uint16_t* r3 = r2 + ldw;
      for (int64_t n = t0; n < v1; n += 16) {
        __m256 a = _mm256_loadu_ps(y + n), b = _mm256_loadu_ps(y + n + 8);
        a = _mm256_fmadd_ps(x0, load8_h16<kBf16>(r0 + n), a);
        b = _mm256_fmadd_ps(x0, load8_h16<kBf16>(r0 + n + 8), b);
        a = _mm256_fmadd_ps(x1, load8_h16<kBf16>(r1 + n), a);
        b = _mm256_fmadd_ps(x1, load8_h16<kBf16>(r1 + n + 8), b);
        a = _mm256_fmadd_ps(x2, load8_h16<kBf16>(r2 + n), a);
        b = _mm256_fmadd_ps(x2, load8_h16<kBf16>(r2 + n + 8), b);
        a = _mm256_fmadd_ps(x3, load8_h16<kBf16>(r3 + n), a);
        b = _mm256_fmadd_ps(x3, load8_h16<kBf16>(r3 + n + 8), b);
        _mm256_storeu_ps(y + n, a);
        _mm256_storeu_ps(y + n + 8, b);
      }
      for (int64_t n = v1; n < t1; ++n) {
        y[n] += x[k] * widen1(r0[n]) + x[k + 1] * widen1(r1[n]) + x[k + 2] * widen1(r2[n]) + x[k + 3] * widen1(r3[n]);
      }
    }
    for (; k < K; ++k) {
      const __m256 xk = _mm256_set1_ps(x[k]);
      const uint16_t* r = w + k * ldw;
      for (int64_t n = t0; n < v1; n += 8) _mm256_storeu_ps(y + n, _mm256_fmadd_ps(xk, load8_h16<kBf16>(r + n), _mm256_loadu_ps(y + n)));
      for (int64_t n = v1; n < t1; ++n) y[n] += x[k] * widen1(r[n]);
    }
  }
}

/// float_to_bf16 in integer lanes: add 0x7FFF plus the kept lsb, keep the
/// high half; NaNs get the quiet bit.
void float_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x400000);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i half[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * h);
      const __m256i bits = _mm256_castps_si256(v);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
      const __m256i r = _mm256_add_epi32(bits, _mm256_add_epi32(bias, lsb));
      const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      half[h] = _mm256_srli_epi32(_mm256_blendv_epi8(r, _mm256_or_si256(bits, quiet), nan), 16);
    }
    // packus works per 128-bit lane: the permute restores element order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(half[0], half[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), packed);
  }
  for (; i < n; ++i) y[i] = float_to_bf16(x[i]);
}

void bf16_to_float_row(const uint16_t* w, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) y[i] = bf16_to_float(w[i]);
}

void sigmoid_row(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_setzero_ps(), abs_ps(v)));
    const __m256 inv = _mm256_div_ps(one, _mm256_add_ps(one, e));
    __m256 r = _mm256_blendv_ps(inv, _mm256_mul_ps(e, inv), is_neg(v));
    r = _mm256_blendv_ps(r, v, is_nan(v));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

// GELU through Abramowitz & Stegun 7.1.26 for erf (|error| <= 1.5e-7), as the
// avx512 table computes it.
void gelu_row(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    const __m256 z = abs_ps(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(z, _mm256_set1_ps(0.3275911f), one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(z, z)));
    const __m256 erf_abs = _mm256_fnmadd_ps(p, e, one);
    const __m256 erf_z = _mm256_blendv_ps(erf_abs, _mm256_sub_ps(_mm256_setzero_ps(), erf_abs), is_neg(v));
    __m256 r = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, erf_z));
    r = _mm256_blendv_ps(r, v, is_nan(v));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

// Four independent accumulators, one 64-byte line per two loads, the
// decode GEMV's page-ahead prefetch (the bench's bandwidth probe).
float sum_row(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_page_ahead(x + i, 32 * sizeof(float));
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  float s = reduce_add(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

}  // namespace

const SimdKernels kKernels{"avx2",  gemv,       gemv_t,     softmax_row,       dot_rows_narrow,
                           axpy_rows_narrow, select_row, gemv_t_f16, half_to_float_row, sigmoid_row, gelu_row, gemv_h16<true>, gemv_h16<false>, bf16_to_float_row,
                           sum_row, float_to_half_row, float_to_bf16_row, nullptr, nullptr, nullptr, nullptr};
}  // namespace avx2

}  // namespace hf2pte::kernels
