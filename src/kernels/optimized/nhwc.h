// Channels-last (NHWC) image kernels, float32: the convolution and pooling
// nodes of XNNPACK payloads (docs/xnnpack-payload.md §7), which keep their
// tensors as [N, H, W, C]. Padding is explicit per side, as the payload
// writes it; output sizes are the caller's (computed from the same fields).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hf2pte::kernels {

/// A 2-D window over an NHWC input [n, ih, iw, c] giving an output [n, oh, ow, .]:
/// output pixel (oy, ox) reads input rows oy * stride_h - pad_top + i * dilation_h
/// for i < kernel_h (columns alike); taps outside the input are padding.
struct Window2d {
  int64_t n = 1, ih = 0, iw = 0;
  int64_t oh = 0, ow = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
};

/// Output size of one spatial dim: (in + pads - dilation * (kernel - 1) - 1) / stride + 1,
/// or 0 when the padded input is smaller than the window.
int64_t window_output_size(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t stride,
                           int64_t dilation);

/// y[n, oy, ox, g * cout_g + o] = clamp(bias[g * cout_g + o] + sum over (i, j, c) of
///   w[g * cout_g + o, i, j, c] * x[n, iy, ix, g * cin_g + c] (+ residual[same index]), lo, hi)
/// with padding taps 0. w is [groups * cout_g, kernel_h, kernel_w, cin_g]
/// (XNNPACK's Conv2d filter); bias and residual may be null. The patches of a
/// block of output pixels are gathered into rows (a 1x1, stride-1, unpadded
/// conv reads x in place) and multiplied with the filter by gemm_f32_nt; the
/// residual add and the clamp run on each block while it is in cache.
void conv2d_nhwc_f32(const Window2d& win, int64_t groups, int64_t cin_g, int64_t cout_g, const float* x,
                     const float* w, const float* bias, const float* residual, float lo, float hi, float* y);

/// A groups-1 filter [cout, kernel_h, kernel_w, cin] repacked once, at load,
/// for the CPU's conv_tile (simd_kernels.h): panels of `width` output
/// channels (conv_panel_width: 64, or 16 / 32 for narrower layers), each
/// [kernel_h * kernel_w * cin][width] (the last panel zero-padded), 64-byte
/// aligned, so a tile streams its panel front to back; and the bias padded
/// alike (zeros without one).
struct PackedConvFilter {
  PackedConvFilter() = default;
  PackedConvFilter(PackedConvFilter&&) = default;  // moving keeps the storage, so the alignment
  PackedConvFilter& operator=(PackedConvFilter&&) = default;
  PackedConvFilter(const PackedConvFilter&) = delete;
  int64_t cout = 0, kernel_h = 0, kernel_w = 0, cin = 0;
  int64_t width = 0;           ///< output channels per panel
  std::vector<float> storage;  ///< panels at storage.data() + offset
  std::vector<float> bias;     ///< panels * width floats
  size_t offset = 0;
  int64_t panels() const;
  int64_t row_len() const { return kernel_h * kernel_w * cin; }
  const float* panel(int64_t p) const;
};
/// Whether this CPU has a conv_tile (AVX-512): otherwise convolutions run
/// as GEMMs over gathered patches (conv2d_nhwc_f32) and nothing is packed.
bool packed_conv_available();
PackedConvFilter pack_conv_filter(const float* w, const float* bias, int64_t cout, int64_t kernel_h, int64_t kernel_w,
                                  int64_t cin);
/// conv2d_nhwc_f32 (groups 1) over a packed filter: every tile of up to
/// kConvTileRows output pixels x one panel reads its inputs in place through
/// row pointers (a window row of kernel_w * cin contiguous floats when
/// dilation_w is 1, else one tap), padding from a zero row and a window row
/// cut by the image edge from a gathered copy; bias, residual and clamp are
/// applied in registers. Tiles are split across the pool panel by panel.
/// Requires packed_conv_available().
void conv2d_packed_nhwc_f32(const Window2d& win, const PackedConvFilter& f, const float* x, const float* residual,
                            float lo, float hi, float* y);
/// Rows [r0, r1) of c = a f^T (+ f's bias) for one panel of a 1x1 packed
/// filter: a [rows, f.cin] with row stride lda, c's panel columns with row
/// stride ldc. On the calling thread; for callers that split the work
/// themselves (Winograd's per-position products).
void gemm_packed_panel_1t(int64_t r0, int64_t r1, const float* a, int64_t lda, const PackedConvFilter& f,
                          int64_t panel, float* c, int64_t ldc);

/// A 3x3 filter [cout, 3, 3, cin] transformed for Winograd F(2x2, 3x3) once,
/// at load: u[k][o][c] = (G g_{o,c} G^T)[k] for the 16 positions k (winograd.cpp).
struct WinogradFilter {
  int64_t cout = 0, cin = 0;
  std::vector<float> u;  ///< [16][cout][cin]; empty where `packed` holds it
  /// On CPUs with a conv_tile: u[k] packed as a 1x1 filter, for k < 16.
  std::vector<PackedConvFilter> packed;
};
/// Whether conv2d_3x3_winograd_nhwc_f32 computes this convolution: groups 1,
/// a 3x3 window, stride 1, dilation 1 (any padding).
bool winograd_applies(const Window2d& win, int64_t groups);
/// Whether Winograd is the faster way for this output size and channel count:
/// its 16 GEMMs have K = cin (the direct one 9 cin) and M = output tiles, so
/// narrow or small convolutions stay direct. Measured with hf2pte_kernel_bench
/// --conv at ResNet-50's shapes (AMD Zen 3, 2 threads): 56x56 64 channels
/// 1.0-1.15x slower, 28x28 128 channels 1.25x faster, 14x14 256 channels
/// 1.3-1.6x faster, 7x7 512 channels (16 tiles) 1.1-1.4x slower. With the
/// packed tiles (Zen 5, 1 thread): 1.13x, 1.5x and 1.35x faster at the last
/// three, so 16 tiles are enough there.
bool winograd_pays(const Window2d& win, int64_t cin);
/// The input channels below which winograd_pays never holds.
inline constexpr int64_t kWinogradMinInputChannels = 128;
WinogradFilter winograd_filter_3x3(const float* w, int64_t cout, int64_t cin);
/// conv2d_nhwc_f32 for the convolutions winograd_applies to, with 16 multiplies
/// per 2x2 output block and channel pair instead of 36 (f32, exact constants:
/// the result differs from the direct one by rounding only).
void conv2d_3x3_winograd_nhwc_f32(const Window2d& win, const WinogradFilter& f, const float* x, const float* bias,
                                  const float* residual, float lo, float hi, float* y);

/// Depthwise: channel c (of c_in * multiplier outputs) reads input channel
/// c / multiplier; w is [kernel_h, kernel_w, c_in * multiplier] (XNNPACK's
/// DepthwiseConv2d filter without its leading 1).
void depthwise_conv2d_nhwc_f32(const Window2d& win, int64_t c_in, int64_t multiplier, const float* x, const float* w,
                               const float* bias, float lo, float hi, float* y);

/// y[n, oy, ox, c] = clamp(max over the window's in-bounds taps, lo, hi)
/// (padding never wins; a window with no in-bounds tap gives -inf).
void max_pool2d_nhwc_f32(const Window2d& win, int64_t c, const float* x, float lo, float hi, float* y);

/// y[n, c] = clamp(mean of x[n, :, :, c] over the hw pixels, lo, hi).
void global_avg_pool_nhwc_f32(int64_t n, int64_t hw, int64_t c, const float* x, float lo, float hi, float* y);

}  // namespace hf2pte::kernels
