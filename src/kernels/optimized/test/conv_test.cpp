// The optimized convolution (im2col + sgemm) against the portable kernel
// (double accumulation) on the shapes ResNet and ViT use and the corners:
// strides, padding, dilation, groups, 1x1 direct, bias or none.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "kernels/optimized/nhwc.h"
#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

/// A square window (kernel k, same stride, padding and dilation on both axes)
/// over n images of h x w.
Window2d square_window(int64_t n, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  Window2d win;
  win.n = n;
  win.ih = h;
  win.iw = w;
  win.kernel_h = win.kernel_w = k;
  win.stride_h = win.stride_w = stride;
  win.dilation_h = win.dilation_w = dil;
  win.pad_top = win.pad_left = pad;
  win.oh = window_output_size(h, pad, pad, k, stride, dil);
  win.ow = window_output_size(w, pad, pad, k, stride, dil);
  return win;
}

/// The shapes ResNet and ViT use and the corners; `relu` clamps the NHWC kernel's output.
struct Shape {
  int64_t C, H, W, O, K, stride, pad, dil, groups;
  bool bias, relu;
};
constexpr Shape kShapes[] = {
    {3, 17, 15, 8, 7, 2, 3, 1, 1, true, true},    // a ResNet stem
    {8, 9, 9, 8, 3, 1, 1, 1, 1, false, true},     // 3x3 same
    {8, 9, 9, 16, 1, 1, 0, 1, 1, true, false},    // 1x1: direct GEMM, the input read in place
    {8, 9, 9, 16, 1, 2, 0, 1, 1, false, false},   // 1x1 stride 2 (a shortcut)
    {6, 10, 11, 4, 3, 2, 2, 2, 2, true, true},    // dilation and groups
    {3, 32, 32, 12, 8, 8, 0, 1, 1, true, false},  // a ViT patch embedding
    {20, 9, 9, 8, 3, 2, 1, 1, 1, false, true},    // 20 channels: a full 16-channel block + a tail
};

/// n floats uniform in [-1, 1) from a seeded generator.
struct Uniform {
  explicit Uniform(uint32_t seed) : gen(seed) {}
  std::vector<float> operator()(size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = dist(gen);
    return v;
  }
  std::mt19937 gen;
  std::uniform_real_distribution<float> dist{-1.0f, 1.0f};
};

TEST(OptimizedConvolution, MatchesPortableKernel) {
  Uniform vals(11);
  for (const Shape& s : kShapes) {
    ArgArena a;
    auto* in = a.tensor<float>({1, s.C, s.H, s.W}, vals(size_t(s.C * s.H * s.W)));
    auto* w = a.tensor<float>({s.O, s.C / s.groups, s.K, s.K}, vals(size_t(s.O * (s.C / s.groups) * s.K * s.K)));
    auto* b = s.bias ? a.tensor<float>({s.O}, vals(size_t(s.O))) : a.none();
    const int64_t OH = (s.H + 2 * s.pad - s.dil * (s.K - 1) - 1) / s.stride + 1;
    const int64_t OW = (s.W + 2 * s.pad - s.dil * (s.K - 1) - 1) / s.stride + 1;
    auto call = [&](auto kernel) {
      auto* out = a.out(ScalarType::kFloat, {1, s.O, OH, OW});
      std::vector<rt::EValue*> args{in, w, b, a.int_list({s.stride, s.stride}), a.int_list({s.pad, s.pad}),
                                    a.int_list({s.dil, s.dil}), a.b(false), a.int_list({0, 0}), a.i(s.groups), out, out};
      rt::KernelContext ctx;
      HF2PTE_EXPECT_OK(kernel(ctx, args));
      return values_of<float>(*out->tensor);
    };
    const auto want = call(&kernels::ConvolutionOut);
    const auto got = call(&kernels::convolution_out);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4) << "C " << s.C << " K " << s.K << " stride " << s.stride << " at " << i;
    }
  }
}

/// [1, C, H, W] <-> [1, H, W, C].
std::vector<float> to_nhwc(const std::vector<float>& x, int64_t C, int64_t H, int64_t W) {
  std::vector<float> y(x.size());
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t p = 0; p < H * W; ++p) y[size_t(p * C + c)] = x[size_t(c * H * W + p)];
  }
  return y;
}
std::vector<float> to_nchw(const std::vector<float>& y, int64_t C, int64_t H, int64_t W) {
  std::vector<float> x(y.size());
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t p = 0; p < H * W; ++p) x[size_t(c * H * W + p)] = y[size_t(p * C + c)];
  }
  return x;
}

// The XNNPACK runtime's channels-last convolution (patch rows x filter^T)
// and max pooling against the portable NCHW kernels on transposed data,
// with the fused output clamp (a folded ReLU).
TEST(NhwcKernels, ConvolutionAndMaxPoolMatchPortableKernels) {
  Uniform vals(12);
  for (const Shape& s : kShapes) {
    ArgArena a;
    const int64_t Cg = s.C / s.groups;
    const auto x = vals(size_t(s.C * s.H * s.W)), w = vals(size_t(s.O * Cg * s.K * s.K)), b = vals(size_t(s.O));
    auto* in = a.tensor<float>({1, s.C, s.H, s.W}, x);
    auto* wt = a.tensor<float>({s.O, Cg, s.K, s.K}, w);
    const Window2d win = square_window(1, s.H, s.W, s.K, s.stride, s.pad, s.dil);
    auto* out = a.out(ScalarType::kFloat, {1, s.O, win.oh, win.ow});
    std::vector<rt::EValue*> args{in, wt, s.bias ? a.tensor<float>({s.O}, b) : a.none(), a.int_list({s.stride, s.stride}),
                                  a.int_list({s.pad, s.pad}), a.int_list({s.dil, s.dil}), a.b(false),
                                  a.int_list({0, 0}), a.i(s.groups), out, out};
    rt::KernelContext ctx;
    HF2PTE_EXPECT_OK(kernels::ConvolutionOut(ctx, args));
    const auto raw = values_of<float>(*out->tensor);
    auto want = raw;
    if (s.relu) for (auto& v : want) v = std::max(v, 0.0f);
    // Filter [O, Cg, K, K] -> [O, K, K, Cg] (XNNPACK's layout).
    std::vector<float> w_nhwc(w.size());
    for (int64_t o = 0; o < s.O; ++o) {
      for (int64_t c = 0; c < Cg; ++c) {
        for (int64_t t = 0; t < s.K * s.K; ++t) w_nhwc[size_t((o * s.K * s.K + t) * Cg + c)] = w[size_t((o * Cg + c) * s.K * s.K + t)];
      }
    }
    std::vector<float> y(want.size());
    const float lo = s.relu ? 0.0f : -std::numeric_limits<float>::infinity();
    conv2d_nhwc_f32(win, s.groups, Cg, s.O / s.groups, to_nhwc(x, s.C, s.H, s.W).data(), w_nhwc.data(),
                    s.bias ? b.data() : nullptr, nullptr, lo, std::numeric_limits<float>::infinity(), y.data());
    const auto got = to_nchw(y, s.O, win.oh, win.ow);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4) << "conv C " << s.C << " K " << s.K << " stride " << s.stride << " at " << i;
    }
    // A residual added in the epilogue (a ResNet block's conv + shortcut), then the clamp.
    const auto residual = vals(want.size());
    conv2d_nhwc_f32(win, s.groups, Cg, s.O / s.groups, to_nhwc(x, s.C, s.H, s.W).data(), w_nhwc.data(),
                    s.bias ? b.data() : nullptr, to_nhwc(residual, s.O, win.oh, win.ow).data(), lo,
                    std::numeric_limits<float>::infinity(), y.data());
    const auto summed = to_nchw(y, s.O, win.oh, win.ow);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(summed[i], std::max(raw[i] + residual[i], lo), 1e-4) << "conv + residual, C " << s.C << " at " << i;
    }

    // Max pooling with the same window (groups and bias aside).
    if (s.groups != 1 || 2 * s.pad > s.K) continue;
    auto* pooled = a.out(ScalarType::kFloat, {1, s.C, win.oh, win.ow});
    auto* idx = a.out(ScalarType::kLong, {1, s.C, win.oh, win.ow});
    std::vector<rt::EValue*> pargs{in, a.int_list({s.K, s.K}), a.int_list({s.stride, s.stride}), a.int_list({s.pad, s.pad}),
                                   a.int_list({s.dil, s.dil}), a.b(false), pooled, idx, pooled};
    HF2PTE_EXPECT_OK(kernels::MaxPool2dWithIndicesOut(ctx, pargs));
    const auto pwant = values_of<float>(*pooled->tensor);
    std::vector<float> py(pwant.size());
    max_pool2d_nhwc_f32(win, s.C, to_nhwc(x, s.C, s.H, s.W).data(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::infinity(), py.data());
    EXPECT_EQ(to_nchw(py, s.C, win.oh, win.ow), pwant) << "max pool C " << s.C << " K " << s.K;
  }
}

/// The convolution by its definition, accumulated in double: y[n, oy, ox, o] over
/// an NHWC input and an [O, K, K, C] filter (groups 1), bias, residual, clamp.
std::vector<float> conv_by_definition(const Window2d& win, int64_t cin, int64_t cout, const std::vector<float>& x,
                                      const std::vector<float>& w, const float* bias, const float* res, float lo,
                                      float hi) {
  std::vector<float> y(size_t(win.n * win.oh * win.ow * cout));
  for (int64_t n = 0; n < win.n; ++n) {
    for (int64_t oy = 0; oy < win.oh; ++oy) {
      for (int64_t ox = 0; ox < win.ow; ++ox) {
        for (int64_t o = 0; o < cout; ++o) {
          double acc = bias == nullptr ? 0.0 : bias[o];
          for (int64_t i = 0; i < win.kernel_h; ++i) {
            const int64_t iy = oy * win.stride_h - win.pad_top + i * win.dilation_h;
            for (int64_t j = 0; j < win.kernel_w; ++j) {
              const int64_t ix = ox * win.stride_w - win.pad_left + j * win.dilation_w;
              if (iy < 0 || iy >= win.ih || ix < 0 || ix >= win.iw) continue;
              for (int64_t c = 0; c < cin; ++c) {
                acc += double(x[size_t(((n * win.ih + iy) * win.iw + ix) * cin + c)]) *
                       double(w[size_t(((o * win.kernel_h + i) * win.kernel_w + j) * cin + c)]);
              }
            }
          }
          const size_t at = size_t(((n * win.oh + oy) * win.ow + ox) * cout + o);
          if (res != nullptr) acc += res[at];
          y[at] = std::min(std::max(float(acc), lo), hi);
        }
      }
    }
  }
  return y;
}

// The packed-filter tiles (AVX-512 CPUs) against the definition: stems with
// few channels, window rows cut by every edge, strides, dilation (one tap
// per row pointer), output channels that fill no panel / more than one,
// pixel counts past a chunk and not a multiple of a tile, a batch of two,
// bias / residual / clamp, at 1 and 3 threads (results do not depend on it).
TEST(NhwcKernels, PackedConvolutionMatchesDefinition) {
  if (!packed_conv_available()) GTEST_SKIP() << "this CPU has no conv_tile (AVX-512)";
  struct P {
    int64_t n, c, h, w, o, k, stride, pad, dil;
  };
  // Panel widths 64, 32 (17, 32 channels) and 16 (5, 6, 16); tails; 1x1 to 7x7.
  const P cases[] = {{1, 3, 23, 21, 64, 7, 2, 3, 1},  {1, 8, 9, 9, 70, 3, 1, 1, 1},   {2, 16, 13, 11, 5, 1, 1, 0, 1},
                     {1, 24, 12, 14, 130, 1, 2, 0, 1}, {1, 6, 10, 11, 17, 3, 2, 2, 2}, {1, 4, 7, 5, 6, 5, 1, 2, 1},
                     {1, 96, 14, 14, 64, 3, 1, 1, 1}, {1, 16, 12, 12, 16, 3, 1, 1, 1}, {1, 16, 12, 12, 32, 3, 2, 1, 1}};
  Uniform vals(21);
  const int threads_before = pool_threads();
  for (const P& s : cases) {
    const Window2d win = square_window(s.n, s.h, s.w, s.k, s.stride, s.pad, s.dil);
    const auto x = vals(size_t(s.n * s.h * s.w * s.c)), w = vals(size_t(s.o * s.k * s.k * s.c)), b = vals(size_t(s.o));
    const size_t out_n = size_t(s.n * win.oh * win.ow * s.o);
    const auto residual = vals(out_n);
    for (bool epilogue : {false, true}) {
      const float lo = epilogue ? 0.0f : -std::numeric_limits<float>::infinity();
      const float hi = epilogue ? 2.5f : std::numeric_limits<float>::infinity();
      const float* bias = epilogue ? b.data() : nullptr;
      const float* res = epilogue ? residual.data() : nullptr;
      const auto want = conv_by_definition(win, s.c, s.o, x, w, bias, res, lo, hi);
      const PackedConvFilter f = pack_conv_filter(w.data(), bias, s.o, s.k, s.k, s.c);
      for (int threads : {1, 3}) {
        set_pool_threads(threads);
        std::vector<float> got(out_n, -7.0f);
        conv2d_packed_nhwc_f32(win, f, x.data(), res, lo, hi, got.data());
        for (size_t i = 0; i < out_n; ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-5 * std::max(1.0f, std::abs(want[i])))
              << "c " << s.c << " o " << s.o << " k " << s.k << " stride " << s.stride << " threads " << threads
              << " at " << i;
        }
      }
      set_pool_threads(threads_before);
    }
  }
}

// Winograd F(2x2, 3x3) against the direct NHWC convolution: odd and even
// output sizes (partial tiles), padding 0 / 1 / asymmetric, batches, more
// tiles than one pass holds, bias and residual and clamp in the epilogue.
TEST(NhwcKernels, WinogradMatchesDirectConvolution) {
  struct W {
    int64_t n, c, h, w, o, pad_top, pad_left, pad_bottom, pad_right;
  };
  const W cases[] = {{1, 8, 9, 9, 16, 1, 1, 1, 1},   {2, 16, 8, 7, 8, 1, 1, 1, 1}, {1, 5, 6, 10, 3, 0, 0, 0, 0},
                     {1, 4, 7, 5, 6, 1, 0, 0, 1},    {1, 32, 56, 48, 8, 1, 1, 1, 1}};
  Uniform vals(13);
  for (const W& s : cases) {
    Window2d win;
    win.n = s.n;
    win.ih = s.h;
    win.iw = s.w;
    win.kernel_h = win.kernel_w = 3;
    win.pad_top = s.pad_top;
    win.pad_left = s.pad_left;
    win.oh = window_output_size(s.h, s.pad_top, s.pad_bottom, 3, 1, 1);
    win.ow = window_output_size(s.w, s.pad_left, s.pad_right, 3, 1, 1);
    ASSERT_TRUE(winograd_applies(win, 1));
    const auto x = vals(size_t(s.n * s.h * s.w * s.c)), w = vals(size_t(s.o * 9 * s.c)), b = vals(size_t(s.o));
    const size_t out_n = size_t(s.n * win.oh * win.ow * s.o);
    const auto residual = vals(out_n);
    for (bool epilogue : {false, true}) {
      const float lo = epilogue ? 0.0f : -std::numeric_limits<float>::infinity();
      const float hi = std::numeric_limits<float>::infinity();
      const float* bias = epilogue ? b.data() : nullptr;
      const float* res = epilogue ? residual.data() : nullptr;
      std::vector<float> want(out_n), got(out_n, -7.0f);
      conv2d_nhwc_f32(win, 1, s.c, s.o, x.data(), w.data(), bias, res, lo, hi, want.data());
      const WinogradFilter f = winograd_filter_3x3(w.data(), s.o, s.c);
      conv2d_3x3_winograd_nhwc_f32(win, f, x.data(), bias, res, lo, hi, got.data());
      for (size_t i = 0; i < out_n; ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-5 * std::max(1.0f, std::abs(want[i])))
            << "c " << s.c << " h " << s.h << " w " << s.w << " at " << i;
      }
    }
  }
  // Not a 3x3 stride-1 window: not Winograd's.
  Window2d strided;
  strided.kernel_h = strided.kernel_w = 3;
  strided.stride_h = strided.stride_w = 2;
  EXPECT_FALSE(winograd_applies(strided, 1));
  Window2d three;
  three.kernel_h = three.kernel_w = 3;
  EXPECT_FALSE(winograd_applies(three, 2));
}

TEST(NhwcKernels, GlobalAveragePoolIsTheMeanOverPixels) {
  const int64_t C = 5, HW = 7;
  std::vector<float> x(static_cast<size_t>(C * HW)), y(static_cast<size_t>(C));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 11) - 3.0f;
  global_avg_pool_nhwc_f32(1, HW, C, x.data(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::infinity(), y.data());
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0;
    for (int64_t p = 0; p < HW; ++p) sum += x[size_t(p * C + c)];
    EXPECT_NEAR(y[size_t(c)], sum / HW, 1e-6) << c;
  }
}

}  // namespace
}  // namespace hf2pte::kernels::testing
