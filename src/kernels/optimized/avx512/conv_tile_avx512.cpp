// The AVX-512 tile of the packed convolution (nhwc.h, conv2d_packed_nhwc_f32;
// the contract is SimdKernels::conv_tile). A tile is up to 6 output pixels by
// one panel of 64 channels (32 or 16 for narrow layers): up to 24 zmm
// accumulators, the panel's NV vectors per input channel loaded once and each
// pixel's input value broadcast against them, so a 64-channel step does 24
// FMAs for 4 loads and 6 broadcasts. The panel is read
// front to back (the packing put it in this order), the inputs through the
// row pointers the caller built, so padding and strides cost nothing here.
#include <immintrin.h>

#include <cstdint>

namespace hf2pte::kernels::avx512 {

namespace {

template <int MR, int NV>
void tile(const float* const* rows, int64_t taps, int64_t klen, const float* panel, const float* bias,
          const float* res, int64_t ld, int64_t nr, float lo, float hi, float* y) {
  __m512 acc[MR][NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const __m512 b = _mm512_loadu_ps(bias + 16 * j);
#pragma GCC unroll 6
    for (int m = 0; m < MR; ++m) acc[m][j] = b;
  }
  const float* bp = panel;
  for (int64_t t = 0; t < taps; ++t) {
    const float* a[MR];
#pragma GCC unroll 6
    for (int m = 0; m < MR; ++m) a[m] = rows[t * MR + m];
    for (int64_t k = 0; k < klen; ++k, bp += 16 * NV) {
      __m512 b[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) b[j] = _mm512_load_ps(bp + 16 * j);
#pragma GCC unroll 6
      for (int m = 0; m < MR; ++m) {
        const __m512 av = _mm512_set1_ps(a[m][k]);
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) acc[m][j] = _mm512_fmadd_ps(av, b[j], acc[m][j]);
      }
    }
  }
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const int64_t left = nr - 16 * j;
    if (left <= 0) break;
    const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
#pragma GCC unroll 6
    for (int m = 0; m < MR; ++m) {
      __m512 v = acc[m][j];
      if (res != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, res + m * ld + 16 * j));
      v = _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
      _mm512_mask_storeu_ps(y + m * ld + 16 * j, mask, v);
    }
  }
}

using TileFn = void (*)(const float* const*, int64_t, int64_t, const float*, const float*, const float*, int64_t,
                        int64_t, float, float, float*);
/// [panel width / 16 - 1, i.e. 0, 1 or 3][rows - 1]
constexpr TileFn kTiles[4][6] = {
    {tile<1, 1>, tile<2, 1>, tile<3, 1>, tile<4, 1>, tile<5, 1>, tile<6, 1>},
    {tile<1, 2>, tile<2, 2>, tile<3, 2>, tile<4, 2>, tile<5, 2>, tile<6, 2>},
    {},
    {tile<1, 4>, tile<2, 4>, tile<3, 4>, tile<4, 4>, tile<5, 4>, tile<6, 4>}};

}  // namespace

void conv_tile(int64_t mr, const float* const* rows, int64_t taps, int64_t klen, const float* panel, int64_t width,
               const float* bias, const float* res, int64_t ld, int64_t nr, float lo, float hi, float* y) {
  kTiles[width / 16 - 1][mr - 1](rows, taps, klen, panel, bias, res, ld, nr, lo, hi, y);
}

}  // namespace hf2pte::kernels::avx512
