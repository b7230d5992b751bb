// Plain C++ versions of the SimdKernels loops (any x86-64 / other CPU).
#include <algorithm>
#include <cmath>

#include "core/scalar_type.h"
#include "kernels/optimized/cpu_features.h"
#include "kernels/optimized/simd_kernels.h"

namespace hf2pte::kernels {

namespace generic {
namespace {

void gemv(const float* x, const float* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) y[n] = bias ? bias[n] : 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float xk = x[k];
    const float* row = w + k * ldw;
    for (int64_t n = n0; n < n1; ++n) y[n] += xk * row[n];
  }
}

void gemv_t(const float* x, const float* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const float* row = w + n * ldw;
    float s = 0;
    for (int64_t k = 0; k < K; ++k) s += x[k] * row[k];
    y[n] = s;
  }
}

void softmax_row(const float* x, float* y, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - m));
  const float inv = float(1.0 / s);
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

bool dot_rows_narrow(const float* a, const float* b, float* c, int64_t d, int64_t n) {
  if (!is_narrow_head(d)) return false;
  gemv_t(a, b, c, d, d, 0, n);
  return true;
}

bool axpy_rows_narrow(const float* a, const float* b, float* c, int64_t k, int64_t d) {
  if (!is_narrow_head(d)) return false;
  gemv(a, b, nullptr, c, k, d, 0, d);
  return true;
}

void select_row(const bool* c, const float* s, float o, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = c[i] ? s[i] : o;
}

void gemv_t_f16(const float* x, const uint16_t* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint16_t* row = w + n * ldw;
    float s = 0;
    for (int64_t k = 0; k < K; ++k) s += x[k] * half_to_float(row[k]);
    y[n] = s;
  }
}

void half_to_float_row(const uint16_t* w, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(w[i]);
}

void float_to_half_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}

template <float (*kWiden)(uint16_t)>
void gemv_h16(const float* x, const uint16_t* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0,
              int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) y[n] = bias ? bias[n] : 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float xk = x[k];
    const uint16_t* row = w + k * ldw;
    for (int64_t n = n0; n < n1; ++n) y[n] += xk * kWiden(row[n]);
  }
}

void float_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
}

void bf16_to_float_row(const uint16_t* w, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(w[i]);
}

void sigmoid_row(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void gelu_row(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * float(M_SQRT1_2)));
}

float sum_row(const float* x, int64_t n) {
  float a[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) a[j] += x[i + j];
  }
  for (; i < n; ++i) a[0] += x[i];
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

}  // namespace

const SimdKernels kKernels{"generic",  gemv,       gemv_t,     softmax_row,       dot_rows_narrow,
                           axpy_rows_narrow, select_row, gemv_t_f16, half_to_float_row, sigmoid_row, gelu_row, gemv_h16<bf16_to_float>, gemv_h16<half_to_float>, bf16_to_float_row,
                           sum_row, float_to_half_row, float_to_bf16_row, nullptr, nullptr, nullptr, nullptr};
}  // namespace generic

const SimdKernels* const* simd_tables(int* count) {
  struct Tables {
    const SimdKernels* t[3];
    int n = 0;
  };
  static const Tables tables = [] {
    __builtin_cpu_init();
    Tables r;
    r.t[r.n++] = &generic::kKernels;
    if (cpu_has_avx2_fma_f16c()) {
      r.t[r.n++] = &avx2::kKernels;
    }
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma")) {
      r.t[r.n++] = &avx512::kKernels;
    }
    return r;
  }();
  *count = tables.n;
  return tables.t;
}

const SimdKernels& simd() {
  static const SimdKernels* k = [] {
    int n = 0;
    const SimdKernels* const* t = simd_tables(&n);
    return t[n - 1];
  }();
  return *k;
}

}  // namespace hf2pte::kernels
