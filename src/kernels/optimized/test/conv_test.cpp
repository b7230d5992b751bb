// The optimized convolution (im2col + sgemm) against the portable kernel
// (double accumulation) on the shapes ResNet and ViT use and the corners:
// strides, padding, dilation, groups, 1x1 direct, bias or none.
#include <random>

#include <gtest/gtest.h>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

TEST(OptimizedConvolution, MatchesPortableKernel) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Shape {
    int64_t C, H, W, O, K, stride, pad, dil, groups;
    bool bias;
  };
  const Shape shapes[] = {
      {3, 17, 15, 8, 7, 2, 3, 1, 1, true},  // a ResNet stem
      {8, 9, 9, 8, 3, 1, 1, 1, 1, false},   // 3x3 same
      {8, 9, 9, 16, 1, 1, 0, 1, 1, true},   // 1x1 direct GEMM
      {8, 9, 9, 16, 1, 2, 0, 1, 1, false},  // 1x1 stride 2 (a shortcut)
      {6, 10, 11, 4, 3, 2, 2, 2, 2, true},  // dilation and groups
      {3, 32, 32, 12, 8, 8, 0, 1, 1, true}, // a ViT patch embedding
  };
  for (const Shape& s : shapes) {
    ArgArena a;
    auto vals = [&](size_t n) {
      std::vector<float> v(n);
      for (auto& x : v) x = dist(gen);
      return v;
    };
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

}  // namespace
}  // namespace hf2pte::kernels::testing
