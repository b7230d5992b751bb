// Inner loops of the optimized kernels, one implementation per ISA: `generic`
// (plain C++, compiled with the project's default flags), `avx2` (avx2/, its
// own static library built with -mavx2 -mfma -mf16c) and `avx512` (avx512/,
// built with -mavx512f -mavx512bw -mavx512vl -mfma); each is called only when
// the CPU reports its features. Kernels pick a table once through simd().
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
  /// Narrow attention heads (head_dim d of 8 or 16, decode's q . K^T):
  /// c[j] = sum_t a[t] * b[j * d + t] for j < n. False for other d.
  bool (*dot_rows_narrow)(const float* a, const float* b, float* c, int64_t d, int64_t n);
  /// ... and p . V: c[t] = sum_j a[j] * b[j * d + t] for t < d, j < k. False for other d.
  bool (*axpy_rows_narrow)(const float* a, const float* b, float* c, int64_t k, int64_t d);
  /// y[i] = c[i] ? s[i] : o for i < n (the attention mask's where).
  void (*select_row)(const bool* c, const float* s, float o, float* y, int64_t n);
  /// gemv_t with fp16 (IEEE half) rows: y[n] = sum_k x[k] * float(w[n * ldw + k]).
  void (*gemv_t_f16)(const float* x, const uint16_t* w, float* y, int64_t K, int64_t ldw, int64_t n0, int64_t n1);
  /// y[i] = float(w[i]) for i < n.
  void (*half_to_float_row)(const uint16_t* w, float* y, int64_t n);
  /// y[i] = 1 / (1 + exp(-x[i])) for i < n (SiLU's sigmoid).
  void (*sigmoid_row)(const float* x, float* y, int64_t n);
  /// y = 0.5 x (1 + erf(x / sqrt(2))) (exact GELU; erf within 1.5e-7 absolute on the SIMD path).
  void (*gelu_row)(const float* x, float* y, int64_t n);
  /// gemv with 16-bit rows of W [K, ldw]: bf16 or IEEE half, widened in the FMA loop
  /// (half the bytes of the f32 stream): y[n] = (bias ? bias[n] : 0) + sum_k x[k] * float(w[k * ldw + n]).
  void (*gemv_bf16)(const float* x, const uint16_t* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0,
                    int64_t n1);
  void (*gemv_f16)(const float* x, const uint16_t* w, const float* bias, float* y, int64_t K, int64_t ldw, int64_t n0,
                   int64_t n1);
  /// y[i] = float(w[i]) for i < n, w bfloat16 (the upper half of a float).
  void (*bf16_to_float_row)(const uint16_t* w, float* y, int64_t n);
  /// Sum of x[0..n) in any order: a read-only stream at the widest loads
  /// (the bench's memory-bandwidth probe).
  float (*sum_row)(const float* x, int64_t n);
  /// y[i] = half(x[i]) for i < n, rounded to nearest even (IEEE half; NaN stays NaN).
  void (*float_to_half_row)(const float* x, uint16_t* y, int64_t n);
  /// y[i] = bf16(x[i]) for i < n, rounded to nearest even (NaN stays NaN), as float_to_bf16.
  void (*float_to_bf16_row)(const float* x, uint16_t* y, int64_t n);
  /// One tile of the packed convolution (nhwc.h, conv2d_packed_nhwc_f32): for
  /// m < mr (1..kConvTileRows) and n < nr (<= width):
  ///   y[m * ld + n] = clamp(bias[n] + sum over t < taps, k < klen of
  ///                   rows[t * mr + m][k] * panel[(t * klen + k) * width + n] (+ res[m * ld + n]), lo, hi)
  /// with `width` a panel width (kConvPanelWidths), `panel` 64-byte aligned,
  /// `bias` width floats, `res` null or the residual. nullptr where the ISA
  /// has none: convolutions then run as GEMMs.
  void (*conv_tile)(int64_t mr, const float* const* rows, int64_t taps, int64_t klen, const float* panel,
                    int64_t width, const float* bias, const float* res, int64_t ld, int64_t nr, float lo, float hi,
                    float* y);
  /// One tile of the weight-tile GEMM (blas_matmul.cpp, wtile_gemm), weights
  /// [N, K]: kWtileCols weight rows broadcast against kWtileRows rows of A^T,
  /// one accumulator per output summed in k order (so the tiling and the
  /// threads do not change a result): for m < mn, j < nn (<= kWtileCols)
  ///   c[m * ldc + j] = sum_k at[k * kWtileRows + m] * w[j * stride + k] (+ bias[j])
  /// All kWtileCols rows of w are read. nullptr where the ISA has none.
  void (*gemm_wtile)(const float* at, const float* w, int64_t stride, int64_t K, const float* bias, float* c,
                     int64_t ldc, int64_t mn, int64_t nn);
  /// One tile of the k-major GEMM (blas_matmul.cpp, ktile_gemm), weights
  /// [K, N]: kKtileRows rows of A (packed a[k * kKtileRows + i]) broadcast
  /// against a panel of kKtileCols weight columns (panel[k * kKtileCols + j]):
  /// for i < mr, j < nr
  ///   c[i * ldc + j] = start + sum_{k < kc} a[..] * panel[..], summed in k order,
  /// start = bias[j] (or 0 without a bias) when `first`, else c[i * ldc + j]:
  /// K blocks chained through c sum exactly as one pass. nullptr with gemm_wtile.
  void (*gemm_ktile)(const float* a, const float* panel, int64_t kc, const float* bias, bool first, float* c,
                     int64_t ldc, int64_t mr, int64_t nr);
  /// Panels for gemm_ktile from 16-bit [K, N] weights (bf16 or IEEE half):
  /// dst[(j / kKtileCols) * panel_stride + k * kKtileCols + j % kKtileCols] =
  /// float(src[k * ld + j]) for k < rows, j < cols, zeros to the last panel's
  /// end. nullptr with gemm_wtile.
  void (*widen_panels16)(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, bool bf16, float* dst,
                         int64_t panel_stride);
};

/// A weight tile's outputs: rows of A (two 16-float vectors) by weight columns.
inline constexpr int64_t kWtileRows = 32;
inline constexpr int64_t kWtileCols = 12;
/// A k-major tile's outputs: rows of A by weight columns (two 16-float vectors).
inline constexpr int64_t kKtileRows = 12;
inline constexpr int64_t kKtileCols = 32;

/// Output pixels and (at most) channels of one conv_tile. Layers with at most
/// 16 or 32 output channels take panels that wide (conv_panel_width), so
/// their tiles do not multiply zeros.
inline constexpr int64_t kConvTileRows = 6;
inline constexpr int64_t kConvPanel = 64;
inline constexpr int64_t conv_panel_width(int64_t cout) { return cout <= 16 ? 16 : cout <= 32 ? 32 : kConvPanel; }

/// Head dims the narrow attention loops take.
inline bool is_narrow_head(int64_t d) { return d == 8 || d == 16; }

namespace generic {
extern const SimdKernels kKernels;
}
namespace avx2 {
extern const SimdKernels kKernels;
}
namespace avx512 {
extern const SimdKernels kKernels;
}

/// Every table this CPU can run, generic first and the best last (tests run them all).
const SimdKernels* const* simd_tables(int* count);

/// The best table this CPU supports (picked once).
const SimdKernels& simd();

}  // namespace hf2pte::kernels
