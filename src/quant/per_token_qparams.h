// Upstream's calculate_scale_and_zero_point (kernels/quantized
// op_choose_qparams.cpp) for one token whose range is [mn, mx] (0 included):
// scale = (mx - mn) / 255 in double (0.1 when it is 0), a scale below 6.1e-5
// raised to it with the range stretched, and the zero point taken from the end
// with the smaller error, rounded to nearest even. One definition for the
// portable kernel and the CUDA device kernel, so both give the same bits.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define HF2PTE_HOST_DEVICE __host__ __device__
#else
#define HF2PTE_HOST_DEVICE
#endif

namespace hf2pte::quant {

HF2PTE_HOST_DEVICE inline void per_token_qparams(float mn, float mx, double* scale, int64_t* zero_point) {
  constexpr int32_t qmin = -128, qmax = 127;
  constexpr float kSmallScale = 6.1e-5f;
  constexpr float kFloatMax = 3.40282347e38f;
  double s = (double(mx) - mn) / (qmax - qmin);
  if (float(s) == 0.0f || fabsf(1.0f / float(s)) > kFloatMax) s = 0.1;  // 0, or 1/s overflows
  if (s < kSmallScale) {
    const float org = float(s);
    s = kSmallScale;
    if (mn == 0.0f) {
      mx = kSmallScale * (qmax - qmin);
    } else if (mx == 0.0f) {
      mn = -kSmallScale * (qmax - qmin);
    } else {
      const float amp = kSmallScale / org;
      mn *= amp;
      mx *= amp;
    }
  }
  const double from_min = qmin - mn / s, from_max = qmax - mx / s;
  const double err_min = -qmin - fabs(mn / s), err_max = qmax - fabs(mx / s);
  const double zp = err_min < err_max ? from_min : from_max;
  *zero_point = zp < qmin ? qmin : zp > qmax ? qmax : int64_t(rintf(float(zp)));
  *scale = s;
}

}  // namespace hf2pte::quant
