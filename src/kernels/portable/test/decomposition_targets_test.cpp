// Kernels the decomposition rules lower to: lt/gt/ge/eq, sum.IntList_out,
// amax/amin, gather, expand_copy, convolution and rand, checked on small
// hand-computed cases (values worked out from ATen's documented semantics).
#include <cmath>
#include <limits>

#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

constexpr auto kF32 = ScalarType::kFloat;
constexpr auto kBool = ScalarType::kBool;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

class DecompositionTargetsTest : public OpTest {};

TEST_P(DecompositionTargetsTest, ComparisonsBroadcast) {
  auto* x = a.tensor<float>({3, 1}, {1, 2, 3});
  auto* y = a.tensor<float>({2}, {2, 3});
  struct Case {
    const char* key;
    std::vector<bool> want;  // [3, 2]: x_i vs y_j
  } cases[] = {
      {"aten::lt.Tensor_out", {true, true, false, true, false, false}},
      {"aten::gt.Tensor_out", {false, false, false, false, true, false}},
      {"aten::ge.Tensor_out", {false, false, true, false, true, true}},
      {"aten::eq.Tensor_out", {false, false, true, false, false, true}},
  };
  for (const auto& c : cases) {
    auto* out = a.out(kBool, {3, 2});
    HF2PTE_EXPECT_OK(run(c.key, {x, y, out, out}));
    EXPECT_TRUE(tensor_matches<bool>(out, {3, 2}, c.want)) << c.key;
  }
  // i64 against f32 compares in f32.
  auto* out = a.out(kBool, {2});
  HF2PTE_EXPECT_OK(run("aten::lt.Tensor_out", {a.tensor<int64_t>({2}, {1, 5}), a.tensor<float>({2}, {1.5f, 4.5f}), out, out}));
  EXPECT_TRUE(tensor_matches<bool>(out, {2}, {true, false}));
}

TEST_P(DecompositionTargetsTest, SumOfBoolsToI64AndI32) {
  auto* m = a.tensor<bool>({2, 3}, {true, false, true, true, true, true});
  auto* o64 = a.out(ScalarType::kLong, {2});
  HF2PTE_EXPECT_OK(run("aten::sum.IntList_out", {m, a.int_list({-1}), a.b(false), a.i(int64_t(ScalarType::kLong)), o64, o64}));
  EXPECT_TRUE(tensor_matches<int64_t>(o64, {2}, {2, 3}));
  auto* o32 = a.out(ScalarType::kInt, {1, 3});
  HF2PTE_EXPECT_OK(run("aten::sum.IntList_out", {m, a.int_list({0}), a.b(true), a.i(int64_t(ScalarType::kInt)), o32, o32}));
  EXPECT_TRUE(tensor_matches<int32_t>(o32, {1, 3}, {2, 1, 2}));
  auto* of = a.out(kF32, {});
  HF2PTE_EXPECT_OK(run("aten::sum.IntList_out", {a.tensor<float>({2, 2}, {1e8f, 1, -1e8f, 1}), a.none(), a.b(false), a.none(), of, of}));
  EXPECT_TRUE(tensor_matches<float>(of, {}, {2}));  // accumulated in double
  HF2PTE_EXPECT_ERROR(run("aten::sum.IntList_out", {m, a.none(), a.b(false), a.i(int64_t(ScalarType::kInt)), o64, o64}),
                      kInvalidArgument, "does not match out dtype");
}

TEST_P(DecompositionTargetsTest, AmaxAminPropagateNan) {
  auto* x = a.tensor<float>({2, 3}, {1, 5, 2, 3, kNan, -1});
  auto* mx = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::amax.out", {x, a.int_list({1}), a.b(false), mx, mx}));
  EXPECT_TRUE(tensor_matches<float>(mx, {2}, {5, kNan}));
  auto* mn = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::amin.out", {x, a.int_list({0}), a.b(false), mn, mn}));
  EXPECT_TRUE(tensor_matches<float>(mn, {3}, {1, kNan, -1}));
  // A row of -inf reduces to -inf, not to the lowest finite float.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  auto* ninf = a.out(kF32, {});
  HF2PTE_EXPECT_OK(run("aten::amax.out", {a.tensor<float>({2}, {-kInf, -kInf}), a.int_list({}), a.b(false), ninf, ninf}));
  EXPECT_TRUE(tensor_matches<float>(ninf, {}, {-kInf}));
  auto* all = a.out(ScalarType::kLong, {1, 1});
  HF2PTE_EXPECT_OK(run("aten::amax.out", {a.tensor<int64_t>({2, 2}, {-7, 4, 9, -2}), a.int_list({}), a.b(true), all, all}));
  EXPECT_TRUE(tensor_matches<int64_t>(all, {1, 1}, {9}));
}

TEST_P(DecompositionTargetsTest, GatherAlongEachDim) {
  auto* x = a.tensor<float>({2, 3}, {10, 11, 12, 20, 21, 22});
  auto* o1 = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::gather.out", {x, a.i(1), a.tensor<int64_t>({2, 2}, {2, 0, -1, 1}), a.b(false), o1, o1}));
  EXPECT_TRUE(tensor_matches<float>(o1, {2, 2}, {12, 10, 22, 21}));
  auto* o0 = a.out(kF32, {1, 3});
  HF2PTE_EXPECT_OK(run("aten::gather.out", {x, a.i(0), a.tensor<int64_t>({1, 3}, {1, 0, 1}), a.b(false), o0, o0}));
  EXPECT_TRUE(tensor_matches<float>(o0, {1, 3}, {20, 11, 22}));
  HF2PTE_EXPECT_ERROR(run("aten::gather.out", {x, a.i(1), a.tensor<int64_t>({1, 1}, {3}), a.b(false), o1, o1}),
                      kOutOfRange, "out of bounds");
}

TEST_P(DecompositionTargetsTest, ExpandCopyMaterialisesBroadcastDims) {
  auto* out = a.out(kF32, {2, 3, 2});
  HF2PTE_EXPECT_OK(run("aten::expand_copy.out", {a.tensor<float>({3, 1}, {1, 2, 3}), a.int_list({2, -1, 2}), a.b(false), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  HF2PTE_EXPECT_ERROR(run("aten::expand_copy.out", {a.tensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}), a.int_list({3, 4}), a.b(false), out, out}),
                      kInvalidArgument, "cannot expand");
}

TEST_P(DecompositionTargetsTest, DepthwiseConvolutionWithPaddingAndStride) {
  // 1 batch, 2 channels of 3x3 (0..8 and 9..17), a 2x2 ones kernel per channel,
  // padding 1, stride 2: windows at rows/cols {-1..0, 1..2}.
  std::vector<float> in(18);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  auto* out = a.out(kF32, {1, 2, 2, 2});
  HF2PTE_EXPECT_OK(run("aten::convolution.out",
                       {a.tensor<float>({1, 2, 3, 3}, in), a.tensor<float>({2, 1, 2, 2}, std::vector<float>(8, 1.0f)),
                        a.tensor<float>({2}, {0.5f, -0.5f}), a.int_list({2, 2}), a.int_list({1, 1}), a.int_list({1, 1}),
                        a.b(false), a.int_list({0, 0}), a.i(2), out, out}));
  // Channel 0: [0], [1+2], [3+6], [4+5+7+8]; channel 1 adds 9 per element covered.
  EXPECT_TRUE(tensor_matches<float>(out, {1, 2, 2, 2}, {0.5f, 3.5f, 9.5f, 24.5f, 8.5f, 20.5f, 26.5f, 59.5f}));
  // A dense 1x1 convolution mixes channels: out = 2*c0 - c1.
  auto* mix = a.out(kF32, {1, 1, 3, 3});
  HF2PTE_EXPECT_OK(run("aten::convolution.out",
                       {a.tensor<float>({1, 2, 3, 3}, in), a.tensor<float>({1, 2, 1, 1}, {2, -1}), a.none(), a.int_list({1, 1}),
                        a.int_list({0, 0}), a.int_list({1, 1}), a.b(false), a.int_list({0, 0}), a.i(1), mix, mix}));
  EXPECT_TRUE(tensor_matches<float>(mix, {1, 1, 3, 3}, {-9, -8, -7, -6, -5, -4, -3, -2, -1}));
}

TEST_P(DecompositionTargetsTest, RandIsInTheUnitInterval) {
  auto* out = a.out(kF32, {50, 40});
  HF2PTE_EXPECT_OK(run("aten::rand.out", {a.int_list({50, 40}), out, out}));
  double sum = 0;
  for (float v : values_of<float>(*out->tensor)) {
    ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
    sum += v;
  }
  EXPECT_NEAR(sum / 2000.0, 0.5, 0.05);  // the standard error is 0.0065
}

HF2PTE_INSTANTIATE_OP_TESTS(DecompositionTargetsTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
