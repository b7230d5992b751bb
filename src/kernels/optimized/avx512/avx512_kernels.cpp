// AVX-512 (F/BW/VL + FMA) versions of the SimdKernels loops. This file is the
// whole hf2pte_kernels_optimized_avx512 library, compiled with those -m flags
// only; simd() calls it only after __builtin_cpu_supports says yes.
// GCC 12's avx512fintrin.h seeds reductions with _mm512_undefined_*(), which
// -Wuninitialized reports at every inlined call site (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/stream_prefetch.h"

namespace hf2pte::kernels {

namespace avx512 {
namespace {

__mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1); }

// Decode GEMV, x[1,K] . W[K,N]: W's rows are contiguous, so a pass reads four
// rows at once as four sequential streams and accumulates into a y tile kept
// in L1 (2048 floats). Memory-bound: what matters is streaming W once.
void gemv(const float* x, const float* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  constexpr int64_t kTile = 2048;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
    const int64_t t1 = std::min(n1, t0 + kTile);
    for (int64_t n = t0; n < t1; n += 16) {
      __mmask16 m = tail_mask(t1 - n);
      _mm512_mask_storeu_ps(y + n, m, bias ? _mm512_maskz_loadu_ps(m, bias + n) : _mm512_setzero_ps());
    }
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const __m512 x0 = _mm512_set1_ps(x[k]), x1 = _mm512_set1_ps(x[k + 1]);
      const __m512 x2 = _mm512_set1_ps(x[k + 2]), x3 = _mm512_set1_ps(x[k + 3]);
      const float* r0 = w + k * ldw;
      const float* r1 = r0 + ldw;
      const float* r2 = r1 + ldw;
      const float* r3 = r2 + ldw;
      int64_t n = t0;
      for (; n + 32 <= t1; n += 32) {
        __m512 a = _mm512_loadu_ps(y + n), b = _mm512_loadu_ps(y + n + 16);
        a = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r0 + n), a);
        b = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r0 + n + 16), b);
        a = _mm512_fmadd_ps(x1, _mm512_loadu_ps(r1 + n), a);
        b = _mm512_fmadd_ps(x1, _mm512_loadu_ps(r1 + n + 16), b);
        a = _mm512_fmadd_ps(x2, _mm512_loadu_ps(r2 + n), a);
        b = _mm512_fmadd_ps(x2, _mm512_loadu_ps(r2 + n + 16), b);
        a = _mm512_fmadd_ps(x3, _mm512_loadu_ps(r3 + n), a);
        b = _mm512_fmadd_ps(x3, _mm512_loadu_ps(r3 + n + 16), b);
        _mm512_storeu_ps(y + n, a);
        _mm512_storeu_ps(y + n + 16, b);
      }
      for (; n < t1; n += 16) {
        __mmask16 m = tail_mask(t1 - n);
        __m512 a = _mm512_maskz_loadu_ps(m, y + n);
        a = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(m, r0 + n), a);
        a = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(m, r1 + n), a);
        a = _mm512_fmadd_ps(x2, _mm512_maskz_loadu_ps(m, r2 + n), a);
        a = _mm512_fmadd_ps(x3, _mm512_maskz_loadu_ps(m, r3 + n), a);
        _mm512_mask_storeu_ps(y + n, m, a);
      }
    }
    for (; k < K; ++k) {
      const __m512 xk = _mm512_set1_ps(x[k]);
      const float* r = w + k * ldw;
      for (int64_t n = t0; n < t1; n += 16) {
        __mmask16 m = tail_mask(t1 - n);
        _mm512_mask_storeu_ps(y + n, m, _mm512_fmadd_ps(xk, _mm512_maskz_loadu_ps(m, r + n), _mm512_maskz_loadu_ps(m, y + n)));
      }
    }
  }
}

// y[n] = x . w[n, :]: dot products of contiguous rows with x (kept in L1),
// one row at a time with four accumulators, so the rows are read as one
// sequential stream. (Four rows at once, four streams, read 29-30 GB/s of a
// 1 GiB matrix on 2 threads where this reads 45-46 GB/s and a plain sum
// 51-54 GB/s, same run; docs/performance.md.)
/// 16 floats (or the first `m` lanes), and 16 halfs widened to floats (vcvtph2ps).
inline __m512 load_row(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_row(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load_row(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load_row(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

/// a[j] += x[k + 16 j ..] * row[k + 16 j ..] for j < 4: 64 columns.
/// kUnrolled keeps the four accumulators in registers (pragma). Without it,
/// GCC 12 at -O2 keeps the j loop and the accumulators in memory, every FMA
/// behind a store-to-load forward. Measured on Zen 4 (docs/performance.md,
/// "Decode row loops"), same runs:
/// - from L2 the unrolled loop is far faster: fp16 rows 24-26 -> 42 GB/s a
///   core, fp32 rows 37 -> 65; stories260K decode 0.090 -> 0.076 ms/token;
/// - fp16 rows from DRAM: faster too (bench-1b's k = 2048 matrices, 1 thread
///   22.5-23.3 -> 23.8-24.8 GB/s, 2 threads 28.5-32.3 -> 32.7-36.1);
/// - fp32 rows from DRAM: slower (bench-110m's matrices, 1 thread 25-28 ->
///   16-18 GB/s; bench-110m fp32 decode 55-61 -> 53-60 tok/s). Loads in
///   order, an extra store or an lfence a step did not recover it; the cause
///   is not known, so large fp32 row sets keep the memory-accumulator loop.
/// Either way the FMAs and their order are the same: the sums do not change.
template <bool kUnrolled, typename T>
inline void fma64(const float* x, const T* row, int64_t k, __m512 (&a)[4]) {
  if constexpr (kUnrolled) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16 * j), load_row(row + k + 16 * j), a[j]);
  } else {
    for (int j = 0; j < 4; ++j) a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16 * j), load_row(row + k + 16 * j), a[j]);
  }
}

/// fp32 row sets up to this size (a call's rows) take the unrolled loop.
constexpr int64_t kUnrolledFp32RowBytes = int64_t(256) << 10;

/// The row loop of gemv_t for fp32 or fp16 (half the bytes, same stream)
/// rows. fp16 rows take eight accumulators, 128 columns a step: bench-1b's
/// fp16 matrices with k = 2048 read 29.7-30.0 GB/s where four (64 a step)
/// read 23.8-25.8 (Zen 4, 2 threads, same runs); fp32 rows gained nothing
/// (24.6-29.4 either way) and keep four.
template <bool kUnrolled, typename T>
void dot_rows(const float* x, const T* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const T* row = w + n * ldw;
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t k = 0;
    if (sizeof(T) == 2 && K >= 128) {
      __m512 b[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (; k + 128 <= K; k += 128) {
        prefetch_page_ahead(row + k, 128 * sizeof(T));
        fma64<kUnrolled>(x, row, k, a);
        fma64<kUnrolled>(x, row, k + 64, b);
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) a[j] = _mm512_add_ps(a[j], b[j]);
    }
    for (; k + 64 <= K; k += 64) {
      prefetch_page_ahead(row + k, 64 * sizeof(T));
      fma64<kUnrolled>(x, row, k, a);
    }
    for (; k < K; k += 16) {
      const __mmask16 m = tail_mask(K - k);
      a[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + k), load_row(row + k, m), a[0]);
    }
    y[n] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
  }
}

void gemv_t(const float* x, const float* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  if ((n1 - n0) * K * int64_t(sizeof(float)) <= kUnrolledFp32RowBytes) {
    dot_rows<true>(x, w, y, K, ldw, n0, n1);
  } else {
    dot_rows<false>(x, w, y, K, ldw, n0, n1);
  }
}

// gemv_t on fp16 rows: the same single sequential stream per row.
void gemv_t_f16(const float* x, const uint16_t* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  dot_rows<true>(x, w, y, K, ldw, n0, n1);
}

void half_to_float_row(const uint16_t* w, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, load_row(w + i, m));
  }
}

void float_to_half_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(y + i, m, h);
  }
}

// exp(x) for x <= 0 (softmax after subtracting the max): 2^n * p(r), Cephes
// expf polynomial on r in [-ln2/2, ln2/2]; below -87.3 the result is 0, as
// std::exp underflows (to a denormal) there.
__m512 exp_nonpos(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_max_ps(x, lo);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

void softmax_row(const float* x, float* y, int64_t n) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - i), x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    mv = _mm512_max_ps(mv, v);
  }
  const float m = _mm512_reduce_max_ps(mv);
  if (nan != 0 || !std::isfinite(m)) {  // all -inf, +inf or NaN rows: the scalar path's semantics
    float mm = m;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - mm));
    for (int64_t i = 0; i < n; ++i) y[i] = float(y[i] / s);
    return;
  }
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = tail_mask(n - i);
    __m512 e = _mm512_maskz_mov_ps(k, exp_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)));
    _mm512_mask_storeu_ps(y + i, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
  }
}

/// Sums each 8-lane half of v[0..7] (v[i] holds rows 2i and 2i+1 of a
/// 16-row block): the 16 row sums, in row order. Three rounds of lane
/// shuffles halve the partials per row; the last leaves row 4m+k at lane
/// 4k+m, which one permute puts back.
inline __m512 reduce_halves16(__m512 v0, __m512 v1, __m512 v2, __m512 v3, __m512 v4, __m512 v5, __m512 v6,
                              __m512 v7) {
  // 128-bit lane j of fold4(p, q) = 4 partials of row j of the 4 rows in p, q.
  auto fold4 = [](__m512 p, __m512 q) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
  };
  const __m512 w0 = fold4(v0, v1), w1 = fold4(v2, v3), w2 = fold4(v4, v5), w3 = fold4(v6, v7);
  // Lane k of fold2(p, q): 2 partials of row k of p, then of row k of q.
  auto fold2 = [](__m512 p, __m512 q) {
    return _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  };
  const __m512 x0 = fold2(w0, w1), x1 = fold2(w2, w3);
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, s);
}

/// Mask of the first `n` lanes, n clamped to [0, 16].
inline __mmask16 lanes(int64_t n) { return n <= 0 ? __mmask16(0) : tail_mask(n); }

/// Rows `2i` and `2i+1` of a 16-row block of b times a, as one vector of two
/// 8-lane halves (D = 8: one load; D = 16: the two rows folded to 8 partials).
/// `left` = floats of the block that exist.
template <int D>
inline __m512 row_pair(__m512 av, const float* blk, int i, int64_t left) {
  if constexpr (D == 8) {
    return _mm512_mul_ps(av, _mm512_maskz_loadu_ps(lanes(left - 16 * i), blk + 16 * i));
  } else {
    const __m512 p = _mm512_mul_ps(av, _mm512_maskz_loadu_ps(lanes(left - 32 * i), blk + 32 * i));
    const __m512 q = _mm512_mul_ps(av, _mm512_maskz_loadu_ps(lanes(left - 32 * i - 16), blk + 32 * i + 16));
    return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  }
}

// q . K^T for head_dim 8 or 16: 16 keys per block, each multiplied by a (a
// twice over for D = 8, two keys per vector), then reduced together.
template <int D>
void dot_rows_narrow_d(const float* a, const float* b, float* c, int64_t n) {
  __m512 av = _mm512_maskz_loadu_ps(lanes(D), a);
  if constexpr (D == 8) av = _mm512_shuffle_f32x4(av, av, _MM_SHUFFLE(1, 0, 1, 0));
  for (int64_t j = 0; j < n; j += 16) {
    const float* blk = b + j * D;
    const int64_t left = std::min<int64_t>(16, n - j) * D;
    const __m512 s = reduce_halves16(row_pair<D>(av, blk, 0, left), row_pair<D>(av, blk, 1, left),
                                     row_pair<D>(av, blk, 2, left), row_pair<D>(av, blk, 3, left),
                                     row_pair<D>(av, blk, 4, left), row_pair<D>(av, blk, 5, left),
                                     row_pair<D>(av, blk, 6, left), row_pair<D>(av, blk, 7, left));
    _mm512_mask_storeu_ps(c + j, lanes(n - j), s);
  }
}

bool dot_rows_narrow(const float* a, const float* b, float* c, int64_t d, int64_t n) {
  if (d == 8) dot_rows_narrow_d<8>(a, b, c, n);
  else if (d == 16) dot_rows_narrow_d<16>(a, b, c, n);
  else return false;
  return true;
}

// p . V for head_dim 8 or 16: four accumulators over the rows of b (two rows
// per vector for D = 8), folded at the end.
template <int D>
void axpy_rows_narrow_d(const float* a, const float* b, float* c, int64_t k) {
  constexpr int64_t kPerVec = 16 / D;  // rows of b per vector
  auto coef = [&](int64_t j) {  // a[j] over row j's lanes (and a[j + 1] over the next row's, D = 8)
    if constexpr (D == 8) return _mm512_mask_mov_ps(_mm512_set1_ps(a[j]), 0xFF00, _mm512_set1_ps(a[j + 1]));
    else return _mm512_set1_ps(a[j]);
  };
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t j = 0;
  for (; j + 4 * kPerVec <= k; j += 4 * kPerVec) {
    acc0 = _mm512_fmadd_ps(coef(j), _mm512_loadu_ps(b + j * D), acc0);
    acc1 = _mm512_fmadd_ps(coef(j + kPerVec), _mm512_loadu_ps(b + (j + kPerVec) * D), acc1);
    acc2 = _mm512_fmadd_ps(coef(j + 2 * kPerVec), _mm512_loadu_ps(b + (j + 2 * kPerVec) * D), acc2);
    acc3 = _mm512_fmadd_ps(coef(j + 3 * kPerVec), _mm512_loadu_ps(b + (j + 3 * kPerVec) * D), acc3);
  }
  for (; j < k; ++j) {  // single rows: the first D lanes
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(a[j]), _mm512_maskz_loadu_ps(lanes(D), b + j * D), acc0);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
  if constexpr (D == 8) s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, _MM_SHUFFLE(1, 0, 3, 2)));
  _mm512_mask_storeu_ps(c, lanes(D), s);
}

bool axpy_rows_narrow(const float* a, const float* b, float* c, int64_t k, int64_t d) {
  if (d == 8) axpy_rows_narrow_d<8>(a, b, c, k);
  else if (d == 16) axpy_rows_narrow_d<16>(a, b, c, k);
  else return false;
  return true;
}

// 16 conditions per step: nonzero bytes become a lane mask for the blend.
void select_row(const bool* c, const float* s, float o, float* y, int64_t n) {
  const __m512 ov = _mm512_set1_ps(o);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m128i bytes = _mm_maskz_loadu_epi8(m, c + i);
    const __mmask16 take = _mm_test_epi8_mask(bytes, bytes);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mask_blend_ps(take, ov, _mm512_maskz_loadu_ps(m, s + i)));
  }
}

/// 16 bf16 or f16 values widened to floats.
template <bool kBf16>
inline __m512 load16_h16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_cvtph_ps(h);
  }
}

/// gemv's loop on 16-bit rows, one row per pass over a y tile of 2048 floats
/// (in L1), 32 columns per step, the column tail in scalar code. Rows of a
/// tile as wide as W follow each other in memory: one sequential stream.
/// (Four rows per pass, four streams 4 KiB apart, read bench-1b's down
/// projection as [k, n] fp16 at 28.8 GB/s where one row reads 34.4, Zen 4,
/// same run.)
template <bool kBf16>
void gemv_h16(const float* x, const uint16_t* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0,
              int64_t n1) {
  auto widen1 = [](uint16_t v) { return kBf16 ? bf16_to_float(v) : half_to_float(v); };
  constexpr int64_t kTile = 2048;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
    const int64_t t1 = std::min(n1, t0 + kTile);
    for (int64_t n = t0; n < t1; ++n) y[n] = bias ? bias[n] : 0.0f;
    const int64_t v1 = t0 + (t1 - t0) / 32 * 32;
    for (int64_t k = 0; k < K; ++k) {
      const __m512 xk = _mm512_set1_ps(x[k]);
      const uint16_t* r = w + k * ldw;
      for (int64_t n = t0; n < v1; n += 32) {
        prefetch_page_ahead(r + n, 64);
        _mm512_storeu_ps(y + n, _mm512_fmadd_ps(xk, load16_h16<kBf16>(r + n), _mm512_loadu_ps(y + n)));
        _mm512_storeu_ps(y + n + 16, _mm512_fmadd_ps(xk, load16_h16<kBf16>(r + n + 16), _mm512_loadu_ps(y + n + 16)));
      }
      for (int64_t n = v1; n < t1; ++n) y[n] += x[k] * widen1(r[n]);
    }
  }
}

/// float_to_bf16 in integer lanes (AVX-512F only: no vcvtneps2bf16 needed):
/// add 0x7FFF plus the kept lsb, keep the high half; NaNs get the quiet bit.
void float_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x400000);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(bias, lsb));
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_or_si512(bits, quiet));
    _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
}

void bf16_to_float_row(const uint16_t* w, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) y[i] = bf16_to_float(w[i]);
}

// sigmoid(x) through e = exp(-|x|) <= 1 (no overflow): 1 / (1 + e) for
// x >= 0, e / (1 + e) below. NaN stays NaN.
void sigmoid_row(const float* x, float* y, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(v)));
    const __m512 inv = _mm512_div_ps(one, _mm512_add_ps(one, e));
    const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 r = _mm512_mask_mul_ps(inv, neg, e, inv);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);  // NaN in, NaN out
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

// GELU through erf(z) = 1 - t (a1 + t (a2 + ... + t a5)) exp(-z^2), t = 1 / (1 + p |z|)
// (Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7), odd in z; NaN stays NaN.
void gelu_row(const float* x, float* y, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 z = _mm512_abs_ps(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(z, _mm512_set1_ps(0.3275911f), one));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(z, z)));
    __m512 erf_abs = _mm512_fnmadd_ps(p, e, one);  // erf(|z|)
    const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 erf_z = _mm512_mask_sub_ps(erf_abs, neg, _mm512_setzero_ps(), erf_abs);
    __m512 r = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, erf_z));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

// Four independent 16-float accumulators, one 64-byte line per load, the
// decode GEMV's page-ahead prefetch (the bench's bandwidth probe).
float sum_row(const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch_page_ahead(x + i, 64 * sizeof(float));
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16) a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

}  // namespace

// conv_tile_avx512.cpp
void conv_tile(int64_t mr, const float* const* rows, int64_t taps, int64_t klen, const float* panel, int64_t width,
               const float* bias, const float* res, int64_t ld, int64_t nr, float lo, float hi, float* y);

// wtile_gemm_avx512.cpp
void gemm_wtile(const float* at, const float* w, int64_t stride, int64_t K, const float* bias, float* c, int64_t ldc,
                int64_t mn, int64_t nn);
void gemm_ktile(const float* a, const float* panel, int64_t kc, const float* bias, bool first, float* c, int64_t ldc,
                int64_t mr, int64_t nr);
void widen_panels16(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, bool bf16, float* dst,
                    int64_t panel_stride);

const SimdKernels kKernels{"avx512",  gemv,       gemv_t,     softmax_row,       dot_rows_narrow,
                           axpy_rows_narrow, select_row, gemv_t_f16, half_to_float_row, sigmoid_row, gelu_row, gemv_h16<true>, gemv_h16<false>, bf16_to_float_row,
                           sum_row, float_to_half_row, float_to_bf16_row, conv_tile, gemm_wtile, gemm_ktile, widen_panels16};
}  // namespace avx512

}  // namespace hf2pte::kernels
