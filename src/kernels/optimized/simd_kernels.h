// Inner loops of the optimized kernels, one implementation per ISA: `generic`
// (plain C++, compiled with the project's default flags) and `avx512`
// (avx512/, its own static library built with -mavx512f -mavx512bw
// -mavx512vl -mfma, called only when the CPU reports those features).
// kernels pick a table once through simd().
#pragma once

#include <cstdint>

namespace hf2pte::kernels {

/// The ISA-specific loops. All pointers are to contiguous float32 data.
struct SimdKernels {
  const char* isa;
  /// y[n] = (bias ? bias[n] : 0) + sum_k x[k] * w[k * ldw + n] for n in [n0, n1).
  void (*gemv)(const float* x, const float* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1);
  /// y[n] = sum_k x[k] * w[n * ldw + k] for n in [n0, n1) (w rows are the vectors: q . k^T).
  void (*gemv_t)(const float* x, const float* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1);
  /// In-place softmax of one contiguous row of n floats.
  void (*softmax_row)(const float* x, float* y, int64_t n);
};

namespace generic {
extern const SimdKernels kKernels;
}
namespace avx512 {
extern const SimdKernels kKernels;
}

/// The best table this CPU supports (picked once).
const SimdKernels& simd();

}  // namespace hf2pte::kernels
