// The AVX-512 tile of the weight-tile GEMM (gemm.h, blas_matmul.cpp's
// wtile_gemm; the contract is SimdKernels::gemm_wtile) and the widening of a
// 16-bit [K, N] weight strip into its panel.
//
// A tile is 12 weight columns by 32 rows of A, held as 24 zmm accumulators.
// Each k loads two vectors of A^T (32 rows side by side) and broadcasts the
// 12 weights against them: 24 FMAs to 14 loads, so the loop is FMA-bound.
// Zen 4, 2 threads, bench-1b's FullyConnected shapes at 128 rows: 184-213
// GFLOPS, 79-91 % of the measured FMA peak (docs/performance.md, session 23).
// The outputs leave once, after the whole K, transposed through a stack tile.
#include <immintrin.h>

#include <cstdint>

#include "kernels/optimized/simd_kernels.h"

namespace hf2pte::kernels::avx512 {

namespace {

template <bool kKMajor>
void wtile(const float* at, const float* w, int64_t stride, int64_t K, const float* bias, float* c, int64_t ldc,
           int64_t mn, int64_t nn) {
  constexpr int kCols = int(kWtileCols);
  static_assert(kWtileRows == 32, "two vectors of A^T per k");
  __m512 acc[kCols][2];
#pragma GCC unroll 12
  for (int j = 0; j < kCols; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
  // Column j's weights: a row of w read along k, or (k_major) the j-th of
  // each k's kCols neighbours.
  const float* row[kCols];
#pragma GCC unroll 12
  for (int j = 0; j < kCols; ++j) row[j] = w + j * stride;
  for (int64_t k = 0; k < K; ++k) {
    const __m512 a0 = _mm512_loadu_ps(at + k * kWtileRows), a1 = _mm512_loadu_ps(at + k * kWtileRows + 16);
    const float* q = w + k * stride;
#pragma GCC unroll 12
    for (int j = 0; j < kCols; ++j) {
      const __m512 b = _mm512_set1_ps(kKMajor ? q[j] : row[j][k]);
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

__mmask16 low_lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

}  // namespace

void gemm_wtile(const float* at, const float* w, int64_t stride, bool k_major, int64_t K, const float* bias, float* c,
                int64_t ldc, int64_t mn, int64_t nn) {
  if (k_major) {
    wtile<true>(at, w, stride, K, bias, c, ldc, mn, nn);
  } else {
    wtile<false>(at, w, stride, K, bias, c, ldc, mn, nn);
  }
}

void widen_strip16(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, bool bf16, float* dst) {
  const __mmask16 lanes = low_lanes(cols);
  for (int64_t k = 0; k < rows; ++k) {
    const __m256i h = _mm256_maskz_loadu_epi16(lanes, src + k * ld);
    const __m512 f =
        bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
    _mm512_storeu_ps(dst + k * 16, f);
  }
}

}  // namespace hf2pte::kernels::avx512
