// mean.out and _softmax.out: dim lists, keepdim, negative dims, numerics of
// -inf rows, and double accumulation.
#include <cmath>
#include <limits>

#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

using F = std::vector<float>;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr auto kF32 = ScalarType::kFloat;

class ReductionTest : public OpTest {
 protected:
  // [2, 3]: [[1, 2, 3], [4, 5, 6]]
  rt::EValue* m23() { return a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}); }
};

TEST_P(ReductionTest, MeanLastDim) {
  auto* out = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {m23(), a.int_list({-1}), a.b(false), a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2}, {2, 5}, tol()));
}

TEST_P(ReductionTest, MeanKeepdimAndFirstDim) {
  auto* out = a.out(kF32, {1, 3});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {m23(), a.int_list({0}), a.b(true), a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {1, 3}, {2.5f, 3.5f, 4.5f}, tol()));
}

TEST_P(ReductionTest, MeanSeveralDimsAndAll) {
  // [2, 2, 2] = 0..7; mean over dims {0, 2} -> [(0+1+4+5)/4, (2+3+6+7)/4].
  auto* x = a.tensor<float>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto* out = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {x, a.int_list({2, -3}), a.b(false), a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2}, {2.5f, 4.5f}, tol()));

  auto* all = a.out(kF32, {});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {x, a.none(), a.b(false), a.none(), all, all}));
  EXPECT_TRUE(tensor_matches<float>(all, {}, {3.5f}, tol()));
  // An empty dim list also reduces everything (ATen's convention).
  auto* all_keep = a.out(kF32, {1, 1, 1});
  HF2PTE_EXPECT_OK(
      run("aten::mean.out", {x, a.int_list({}), a.b(true), a.i(6), all_keep, all_keep}));
  EXPECT_TRUE(tensor_matches<float>(all_keep, {1, 1, 1}, {3.5f}, tol()));
}

TEST_P(ReductionTest, MeanAccumulatesInDouble) {
  // 1e8, 1, -1e8, 1: a float32 running sum loses the ones; double keeps them.
  auto* out = a.out(kF32, {1});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {a.tensor<float>({1, 4}, {1e8f, 1, -1e8f, 1}),
                                          a.int_list({1}), a.b(false), a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {1}, {0.5f}, tol()));
}

TEST_P(ReductionTest, MeanZeroDimAndNonContiguous) {
  auto* out = a.out(kF32, {});
  HF2PTE_EXPECT_OK(run("aten::mean.out",
                       {a.tensor<float>({}, {4}), a.int_list({0}), a.b(false), a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {}, {4}, tol()));
  // Column-major storage of [[1,2,3],[4,5,6]].
  auto* x = a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}, {1, 0});
  auto* o2 = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {x, a.int_list({0}), a.b(false), a.none(), o2, o2}));
  EXPECT_TRUE(tensor_matches<float>(o2, {3}, {2.5f, 3.5f, 4.5f}, tol()));
}

TEST_P(ReductionTest, MeanErrors) {
  auto* out = a.out(kF32, {2});
  HF2PTE_EXPECT_ERROR(
      run("aten::mean.out", {m23(), a.int_list({1, -1}), a.b(false), a.none(), out, out}),
      kInvalidArgument, "appears multiple times");
  HF2PTE_EXPECT_ERROR(
      run("aten::mean.out", {m23(), a.int_list({2}), a.b(false), a.none(), out, out}),
      kInvalidArgument, "aten::mean.out: dim 2 out of range");
  auto* outi = a.out(ScalarType::kLong, {2});
  HF2PTE_EXPECT_ERROR(run("aten::mean.out", {a.tensor<int64_t>({2, 1}, {1, 2}), a.int_list({1}),
                                             a.b(false), a.none(), outi, outi}),
                      kNotSupported, "aten::mean.out: self has dtype i64");
  HF2PTE_EXPECT_ERROR(
      run("aten::mean.out", {m23(), a.int_list({1}), a.b(false), a.i(7), out, out}),
      kNotSupported, "dtype argument 7");
  auto* small = a.out(kF32, {1});
  HF2PTE_EXPECT_ERROR(
      run("aten::mean.out", {m23(), a.int_list({1}), a.b(false), a.none(), small, small}),
      kOutOfRange, "aten::mean.out");
}

TEST_P(ReductionTest, SoftmaxRows) {
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::_softmax.out",
                       {a.tensor<float>({2, 3}, {0, 0, 0, 1, 2, 3}), a.i(-1), a.b(false), out, out}));
  const double e1 = std::exp(-2.0), e2 = std::exp(-1.0), s = e1 + e2 + 1.0;
  EXPECT_TRUE(tensor_matches<float>(
      out, {2, 3}, {1.f / 3, 1.f / 3, 1.f / 3, float(e1 / s), float(e2 / s), float(1 / s)}, tol()));
}

TEST_P(ReductionTest, SoftmaxDimZeroIsStable) {
  // Large logits would overflow exp without subtracting the max.
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::_softmax.out", {a.tensor<float>({2, 2}, {1000, 5, 1000, 5}), a.i(0),
                                              a.b(false), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {0.5f, 0.5f, 0.5f, 0.5f}, tol()));
}

TEST_P(ReductionTest, SoftmaxInfinities) {
  // A masked entry (-inf) next to finite ones gets 0; a row of only -inf is
  // NaN, as in torch.
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::_softmax.out",
                       {a.tensor<float>({2, 3}, {0, -kInf, 0, -kInf, -kInf, -kInf}), a.i(1),
                        a.b(false), out, out}));
  const float nan = std::nanf("");
  EXPECT_TRUE(tensor_matches<float>(out, {2, 3}, {0.5f, 0, 0.5f, nan, nan, nan}, tol()));
  // A NaN anywhere poisons its row.
  auto* o2 = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::_softmax.out",
                       {a.tensor<float>({2}, {1, nan}), a.i(0), a.b(false), o2, o2}));
  EXPECT_TRUE(tensor_matches<float>(o2, {2}, {nan, nan}, tol()));
}

TEST_P(ReductionTest, SoftmaxMiddleDimAndZeroDim) {
  // [2, 2, 1] over dim 1: pairs (0, ln 3) -> (1/4, 3/4).
  const float l3 = std::log(3.0f);
  auto* out = a.out(kF32, {2, 2, 1});
  HF2PTE_EXPECT_OK(run("aten::_softmax.out", {a.tensor<float>({2, 2, 1}, {0, l3, l3, 0}), a.i(-2),
                                              a.b(false), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2, 1}, {0.25f, 0.75f, 0.75f, 0.25f}, tol()));
  auto* o0 = a.out(kF32, {});
  HF2PTE_EXPECT_OK(
      run("aten::_softmax.out", {a.tensor<float>({}, {7}), a.i(0), a.b(false), o0, o0}));
  EXPECT_TRUE(tensor_matches<float>(o0, {}, {1}, tol()));
}

TEST_P(ReductionTest, SoftmaxErrors) {
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_ERROR(run("aten::_softmax.out", {m23(), a.i(2), a.b(false), out, out}),
                      kInvalidArgument, "dim 2 out of range");
  HF2PTE_EXPECT_ERROR(run("aten::_softmax.out", {m23(), a.i(1), a.b(true), out, out}),
                      kNotSupported, "half_to_float");
  HF2PTE_EXPECT_ERROR(run("aten::_softmax.out", {m23(), a.d(1.0), a.b(false), out, out}),
                      kInvalidProgram, "dim");
}

HF2PTE_INSTANTIATE_OP_TESTS(ReductionTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
