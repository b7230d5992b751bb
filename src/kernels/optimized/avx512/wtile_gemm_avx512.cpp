// The AVX-512 tiles of the prefill GEMMs over weights read in place
// (blas_matmul.cpp; the contracts are SimdKernels::gemm_wtile and
// gemm_ktile) and the widening of 16-bit k-major weights into panels.
//
// gemm_wtile, weights [N, K] (rows along k): 12 weight columns by 32 rows of
// A, held as 24 zmm accumulators. Each k loads two vectors of A^T (32 rows
// side by side) and broadcasts the 12 weights against them: 24 FMAs to 14
// loads, so the loop is FMA-bound. Zen 4, 2 threads, bench-1b's
// FullyConnected shapes at 128 rows: 184-213 GFLOPS, 79-91 % of the measured
// FMA peak (docs/performance.md, session 23). The outputs leave once, after
// the whole K, transposed through a stack tile.
//
// gemm_ktile, weights [K, N] (rows along n): the same 24 accumulators the
// other way round, 12 rows of A broadcast against two vectors of a 32-column
// weight panel, so each output row leaves as two vector stores.
#include <immintrin.h>

#include <cstdint>

#include "kernels/optimized/simd_kernels.h"

namespace hf2pte::kernels::avx512 {

namespace {

__mmask16 low_lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

}  // namespace

void gemm_wtile(const float* at, const float* w, int64_t stride, int64_t K, const float* bias, float* c, int64_t ldc,
                int64_t mn, int64_t nn) {
  constexpr int kCols = int(kWtileCols);
  static_assert(kWtileRows == 32, "two vectors of A^T per k");
  __m512 acc[kCols][2];
#pragma GCC unroll 12
  for (int j = 0; j < kCols; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
  const float* row[kCols];  // column j's weights, read along k
#pragma GCC unroll 12
  for (int j = 0; j < kCols; ++j) row[j] = w + j * stride;
  for (int64_t k = 0; k < K; ++k) {
    const __m512 a0 = _mm512_loadu_ps(at + k * kWtileRows), a1 = _mm512_loadu_ps(at + k * kWtileRows + 16);
#pragma GCC unroll 12
    for (int j = 0; j < kCols; ++j) {
      const __m512 b = _mm512_set1_ps(row[j][k]);
      acc[j][0] = _mm512_fmadd_ps(a0, b, acc[j][0]);
      acc[j][1] = _mm512_fmadd_ps(a1, b, acc[j][1]);
    }
  }
  alignas(64) float tile[kCols][kWtileRows];
#pragma GCC unroll 12
  for (int j = 0; j < kCols; ++j) {
    _mm512_store_ps(tile[j], acc[j][0]);
    _mm512_store_ps(tile[j] + 16, acc[j][1]);
  }
  for (int64_t m = 0; m < mn; ++m) {
    for (int64_t j = 0; j < nn; ++j) c[m * ldc + j] = tile[j][m] + (bias != nullptr ? bias[j] : 0.0f);
  }
}

void gemm_ktile(const float* a, const float* panel, int64_t kc, const float* bias, bool first, float* c, int64_t ldc,
                int64_t mr, int64_t nr) {
  constexpr int kRows = int(kKtileRows);
  static_assert(kKtileCols == 32, "two vectors of weights per k");
  const __mmask16 lo = low_lanes(nr), hi = low_lanes(nr - 16);
  __m512 acc[kRows][2];
  if (first) {
    const __m512 b0 = bias != nullptr ? _mm512_maskz_loadu_ps(lo, bias) : _mm512_setzero_ps();
    const __m512 b1 = bias != nullptr ? _mm512_maskz_loadu_ps(hi, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) acc[i][0] = b0, acc[i][1] = b1;
  } else {
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const float* ci = c + (i < mr ? i : 0) * ldc;  // rows past mr are never stored: read row 0
      acc[i][0] = _mm512_maskz_loadu_ps(lo, ci);
      acc[i][1] = _mm512_maskz_loadu_ps(hi, ci + 16);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 w0 = _mm512_loadu_ps(panel + k * kKtileCols), w1 = _mm512_loadu_ps(panel + k * kKtileCols + 16);
    const float* q = a + k * kRows;
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const __m512 x = _mm512_set1_ps(q[i]);
      acc[i][0] = _mm512_fmadd_ps(x, w0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(x, w1, acc[i][1]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    if (i < mr) {
      _mm512_mask_storeu_ps(c + i * ldc, lo, acc[i][0]);
      _mm512_mask_storeu_ps(c + i * ldc + 16, hi, acc[i][1]);
    }
  }
}

void widen_panels16(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, bool bf16, float* dst,
                    int64_t panel_stride) {
  const int64_t padded = (cols + kKtileCols - 1) / kKtileCols * kKtileCols;
  for (int64_t k = 0; k < rows; ++k) {
    const uint16_t* s = src + k * ld;
    for (int64_t j = 0; j < padded; j += 16) {  // a last panel's missing columns as zeros
      const __m256i h = _mm256_maskz_loadu_epi16(low_lanes(cols - j), s + j);
      const __m512 f =
          bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
      _mm512_storeu_ps(dst + (j / kKtileCols) * panel_stride + k * kKtileCols + j % kKtileCols, f);
    }
  }
}

}  // namespace hf2pte::kernels::avx512
