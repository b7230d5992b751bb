// Elementwise op tests: broadcasting, type promotion, alpha, scalar forms and
// the error paths. Expected values are computed by hand.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

using F = std::vector<float>;
using L = std::vector<int64_t>;
using B = std::vector<bool>;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr auto kF32 = ScalarType::kFloat;
constexpr auto kI64 = ScalarType::kLong;
constexpr auto kBool = ScalarType::kBool;

class ElementwiseTest : public OpTest {};

TEST_P(ElementwiseTest, AddSameShape) {
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                                         a.tensor<float>({2, 3}, {10, 20, 30, 40, 50, 60}),
                                         a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 3}, {11, 22, 33, 44, 55, 66}, tol()));
}

TEST_P(ElementwiseTest, AddBroadcastsRowAndColumn) {
  // [2,1] + [1,3] -> [2,3]; alpha scales `other`.
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<float>({2, 1}, {1, 2}),
                                         a.tensor<float>({1, 3}, {10, 20, 30}), a.d(0.5), out,
                                         out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 3}, {6, 11, 16, 7, 12, 17}, tol()));
}

TEST_P(ElementwiseTest, AddBroadcastsLowerRankAndZeroDim) {
  auto* out = a.out(kF32, {2, 2, 3});
  HF2PTE_EXPECT_OK(run("aten::add.out",
                       {a.tensor<float>({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
                        a.tensor<float>({3}, {100, 200, 300}), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<float>(
      out, {2, 2, 3}, {100, 201, 302, 103, 204, 305, 106, 207, 308, 109, 210, 311}, tol()));

  auto* out0 = a.out(kF32, {});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<float>({}, {1.5f}), a.tensor<float>({}, {2}),
                                         a.i(1), out0, out0}));
  EXPECT_TRUE(tensor_matches<float>(out0, {}, {3.5f}, tol()));

  auto* out1 = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<float>({}, {1}), a.tensor<float>({2}, {2, 3}),
                                         a.i(1), out1, out1}));
  EXPECT_TRUE(tensor_matches<float>(out1, {2}, {3, 4}, tol()));
}

TEST_P(ElementwiseTest, AddHighRankBroadcast) {
  // Rank 6 with broadcasting on alternating dims.
  std::vector<int64_t> sa = {2, 1, 2, 1, 2, 1}, sb = {1, 2, 1, 2, 1, 2};
  std::vector<float> va(8), vb(8);
  for (int k = 0; k < 8; ++k) va[size_t(k)] = float(k * 100), vb[size_t(k)] = float(k);
  auto* out = a.out(kF32, {2, 2, 2, 2, 2, 2});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor(sa, va), a.tensor(sb, vb), a.i(1), out, out}));
  // out[i0..i5] = 100 * (4 i0 + 2 i2 + i4) + (4 i1 + 2 i3 + i5)
  std::vector<float> want;
  for (int k = 0; k < 64; ++k) {
    const int i0 = (k >> 5) & 1, i1 = (k >> 4) & 1, i2 = (k >> 3) & 1, i3 = (k >> 2) & 1,
              i4 = (k >> 1) & 1, i5 = k & 1;
    want.push_back(float(100 * (4 * i0 + 2 * i2 + i4) + (4 * i1 + 2 * i3 + i5)));
  }
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2, 2, 2, 2, 2}, want, tol()));
}

TEST_P(ElementwiseTest, AddReadsNonContiguousInput) {
  // Logical [[1,2,3],[4,5,6]] stored column-major (dim order [1, 0]).
  auto* x = a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}, {1, 0});
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::add.out",
                       {x, a.tensor<float>({3}, {10, 20, 30}), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 3}, {11, 22, 33, 14, 25, 36}, tol()));
}

TEST_P(ElementwiseTest, AddInt64AndPromotion) {
  auto* out = a.out(kI64, {3});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<int64_t>({3}, {1, -2, 3}),
                                         a.tensor<int64_t>({3}, {10, 20, 30}), a.i(3), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {3}, {31, 58, 93}));

  // int64 + float -> float.
  auto* outf = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<int64_t>({3}, {1, 2, 3}),
                                         a.tensor<float>({3}, {0.5f, 0.25f, -1}), a.i(1), outf,
                                         outf}));
  EXPECT_TRUE(tensor_matches<float>(outf, {3}, {1.5f, 2.25f, 2}, tol()));

  // An int64 result may be written to a float out ...
  auto* outf2 = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor<int64_t>({2}, {1, 2}),
                                         a.tensor<int64_t>({2}, {3, 4}), a.i(1), outf2, outf2}));
  EXPECT_TRUE(tensor_matches<float>(outf2, {2}, {4, 6}, tol()));
  // ... but a float result not to an int64 out.
  auto* outi = a.out(kI64, {2});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<int64_t>({2}, {1, 2}),
                                            a.tensor<float>({2}, {3, 4}), a.i(1), outi, outi}),
                      kNotSupported, "out has dtype i64; expected one of f16, f32, bf16");
}

TEST_P(ElementwiseTest, AddErrors) {
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<float>({2, 3}, F(6, 1)),
                                            a.tensor<float>({2}, {1, 2}), a.i(1), out, out}),
                      kInvalidArgument, "aten::add.out: shapes [2, 3] and [2] cannot be broadcast");
  // Capacity exceeded on resize: out was planned for 2 elements.
  auto* small = a.out(kF32, {2});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<float>({3}, {1, 2, 3}),
                                            a.tensor<float>({3}, {1, 2, 3}), a.i(1), small, small}),
                      kOutOfRange, "aten::add.out: out:");
  // A static out cannot change shape.
  auto* fixed = a.out(kF32, {4}, rt::ShapeDynamism::kStatic);
  EXPECT_FALSE(run("aten::add.out", {a.tensor<float>({3}, {1, 2, 3}),
                                     a.tensor<float>({3}, {1, 2, 3}), a.i(1), fixed, fixed})
                   .is_ok());
  // Out of the wrong rank.
  auto* rank2 = a.out(kF32, {1, 3});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<float>({3}, {1, 2, 3}),
                                            a.tensor<float>({3}, {1, 2, 3}), a.i(1), rank2, rank2}),
                      kInvalidProgram, "rank");
  // Integral inputs reject a float alpha.
  auto* outi = a.out(kI64, {1});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<int64_t>({1}, {1}),
                                            a.tensor<int64_t>({1}, {1}), a.d(0.5), outi, outi}),
                      kInvalidArgument, "alpha");
  // Unsupported dtypes are named.
  auto* outb = a.out(kBool, {1});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<bool>({1}, {true}),
                                            a.tensor<bool>({1}, {true}), a.i(1), outb, outb}),
                      kNotSupported, "bool");
  auto* out32 = a.out(kF32, {1});
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<int32_t>({1}, {1}),
                                            a.tensor<float>({1}, {1}), a.i(1), out32, out32}),
                      kNotSupported, "aten::add.out: self has dtype i32");
  // Wrong arg tags and arity.
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.i(1), a.tensor<float>({1}, {1}), a.i(1), out32,
                                            out32}),
                      kInvalidProgram, "aten::add.out: self");
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<float>({1}, {1}), a.tensor<float>({1}, {1}),
                                            a.i(1), out32}),
                      kInvalidProgram, "expected 5");
  HF2PTE_EXPECT_ERROR(run("aten::add.out", {a.tensor<float>({1}, {1}), a.tensor<float>({1}, {1}),
                                            a.none(), out32, out32}),
                      kInvalidProgram, "alpha");
}

TEST_P(ElementwiseTest, ReturnSlotReceivesOut) {
  auto* out = a.out(kF32, {1});
  auto* ret = a.none();
  HF2PTE_EXPECT_OK(run("aten::add.out",
                       {a.tensor<float>({1}, {1}), a.tensor<float>({1}, {2}), a.i(1), out, ret}));
  ASSERT_EQ(ret->tag, rt::Tag::kTensor);
  EXPECT_EQ(ret->tensor, out->tensor);
}

TEST_P(ElementwiseTest, AddScalar) {
  auto* out = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::add.Scalar_out",
                       {a.tensor<float>({3}, {1, 2, 3}), a.d(1.5), a.i(2), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3}, {4, 5, 6}, tol()));
  auto* outi = a.out(kI64, {2});
  HF2PTE_EXPECT_OK(run("aten::add.Scalar_out",
                       {a.tensor<int64_t>({2}, {5, -5}), a.i(2), a.i(1), outi, outi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {2}, {7, -3}));
  // int64 tensor + float number -> float.
  auto* outf = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::add.Scalar_out",
                       {a.tensor<int64_t>({2}, {5, -5}), a.d(0.5), a.i(1), outf, outf}));
  EXPECT_TRUE(tensor_matches<float>(outf, {2}, {5.5f, -4.5f}, tol()));
}

TEST_P(ElementwiseTest, Sub) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::sub.out", {a.tensor<float>({2, 2}, {10, 20, 30, 40}),
                                         a.tensor<float>({2}, {1, 2}), a.i(2), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {8, 16, 28, 36}, tol()));
  auto* outi = a.out(kI64, {2});
  HF2PTE_EXPECT_OK(run("aten::sub.out", {a.tensor<int64_t>({2}, {1, 2}),
                                         a.tensor<int64_t>({}, {5}), a.i(1), outi, outi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {2}, {-4, -3}));
}

TEST_P(ElementwiseTest, MulAndMulScalar) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::mul.out", {a.tensor<float>({2, 1}, {2, 3}),
                                         a.tensor<float>({2}, {4, 5}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {8, 10, 12, 15}, tol()));
  auto* outi = a.out(kI64, {3});
  HF2PTE_EXPECT_OK(run("aten::mul.out", {a.tensor<int64_t>({3}, {1, -2, 3}),
                                         a.tensor<bool>({3}, {true, true, false}), outi, outi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {3}, {1, -2, 0}));
  auto* outs = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(
      run("aten::mul.Scalar_out", {a.tensor<float>({2}, {1.5f, -2}), a.d(0.125), outs, outs}));
  EXPECT_TRUE(tensor_matches<float>(outs, {2}, {0.1875f, -0.25f}, tol()));
  auto* outsi = a.out(kI64, {2});
  HF2PTE_EXPECT_OK(
      run("aten::mul.Scalar_out", {a.tensor<int64_t>({2}, {3, -4}), a.i(-2), outsi, outsi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outsi, {2}, {-6, 8}));
}

TEST_P(ElementwiseTest, DivIsTrueDivision) {
  auto* out = a.out(kF32, {4});
  HF2PTE_EXPECT_OK(run("aten::div.out", {a.tensor<float>({4}, {1, -3, 0, 1}),
                                         a.tensor<float>({4}, {4, 2, 0, 0}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {4}, {0.25f, -1.5f, std::nanf(""), kInf}, tol()));
  auto* outi = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::div.out", {a.tensor<int64_t>({2}, {7, -7}),
                                         a.tensor<int64_t>({}, {2}), outi, outi}));
  EXPECT_TRUE(tensor_matches<float>(outi, {2}, {3.5f, -3.5f}, tol()));
  auto* bad = a.out(kI64, {2});
  HF2PTE_EXPECT_ERROR(run("aten::div.out", {a.tensor<int64_t>({2}, {7, -7}),
                                            a.tensor<int64_t>({}, {2}), bad, bad}),
                      kNotSupported, "out has dtype i64");
}

TEST_P(ElementwiseTest, Neg) {
  auto* out = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::neg.out", {a.tensor<float>({3}, {1, -2, 0}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3}, {-1, 2, -0.0f}, tol()));
  auto* outi = a.out(kI64, {2});
  HF2PTE_EXPECT_OK(run("aten::neg.out", {a.tensor<int64_t>({2}, {5, -7}), outi, outi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {2}, {-5, 7}));
  auto* outb = a.out(kBool, {1});
  HF2PTE_EXPECT_ERROR(run("aten::neg.out", {a.tensor<bool>({1}, {true}), outb, outb}),
                      kNotSupported, "aten::neg.out: self has dtype bool");
}

TEST_P(ElementwiseTest, RsqrtAndSigmoid) {
  auto* out = a.out(kF32, {4});
  HF2PTE_EXPECT_OK(run("aten::rsqrt.out", {a.tensor<float>({4}, {4, 0.25f, 0, -1}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {4}, {0.5f, 2, kInf, std::nanf("")}, tol()));
  // Integer input gives a float result.
  auto* outi = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::rsqrt.out", {a.tensor<int64_t>({2}, {16, 1}), outi, outi}));
  EXPECT_TRUE(tensor_matches<float>(outi, {2}, {0.25f, 1}, tol()));
  auto* bad = a.out(kI64, {2});
  HF2PTE_EXPECT_ERROR(run("aten::rsqrt.out", {a.tensor<int64_t>({2}, {16, 1}), bad, bad}),
                      kNotSupported, "out has dtype i64");

  auto* s = a.out(kF32, {4});
  HF2PTE_EXPECT_OK(run("aten::sigmoid.out",
                       {a.tensor<float>({4}, {0, 100, -100, std::log(3.0f)}), s, s}));
  EXPECT_TRUE(tensor_matches<float>(s, {4}, {0.5f, 1, 3.7200760e-44f, 0.75f}, tol()));
}

TEST_P(ElementwiseTest, TanhAndErf) {
  auto* t = a.out(kF32, {4});
  HF2PTE_EXPECT_OK(run("aten::tanh.out", {a.tensor<float>({4}, {0, 0.5f, -30, 30}), t, t}));
  EXPECT_TRUE(tensor_matches<float>(t, {4}, {0, 0.46211716f, -1, 1}, tol()));
  auto* e = a.out(kF32, {4});
  HF2PTE_EXPECT_OK(run("aten::erf.out", {a.tensor<float>({4}, {0, 0.5f, -1, 10}), e, e}));
  EXPECT_TRUE(tensor_matches<float>(e, {4}, {0, 0.52049988f, -0.84270079f, 1}, tol()));
  // Integer input gives a float result; an integer out is refused.
  auto* ti = a.out(kF32, {1});
  HF2PTE_EXPECT_OK(run("aten::tanh.out", {a.tensor<int64_t>({1}, {0}), ti, ti}));
  EXPECT_TRUE(tensor_matches<float>(ti, {1}, {0}, tol()));
  auto* bad = a.out(kI64, {1});
  HF2PTE_EXPECT_ERROR(run("aten::erf.out", {a.tensor<int64_t>({1}, {1}), bad, bad}), kNotSupported,
                      "out has dtype i64");
}

TEST_P(ElementwiseTest, ExpLog1pAndClamp) {
  auto* e = a.out(kF32, {4});
  HF2PTE_EXPECT_OK(run("aten::exp.out", {a.tensor<float>({4}, {0, 1, -100, 100}), e, e}));
  EXPECT_TRUE(tensor_matches<float>(e, {4}, {1, 2.7182817f, 3.7200760e-44f, kInf}, tol()));
  auto* l = a.out(kF32, {3});
  // log1p keeps precision near 0 where log(1 + x) would round to 0.
  HF2PTE_EXPECT_OK(run("aten::log1p.out", {a.tensor<float>({3}, {0, 1e-10f, 1.7182817f}), l, l}));
  EXPECT_TRUE(tensor_matches<float>(l, {3}, {0, 1e-10f, 1}, tol()));

  auto* c = a.out(kF32, {5});
  HF2PTE_EXPECT_OK(run("aten::clamp.out", {a.tensor<float>({5}, {-3, -1, 0.5f, 2, std::nanf("")}), a.d(-1.5), a.d(1.5), c, c}));
  EXPECT_TRUE(tensor_matches<float>(c, {5}, {-1.5f, -1, 0.5f, 1.5f, std::nanf("")}, tol()));
  // Either bound may be None (gpt-oss clamps the gate from above only).
  auto* up = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::clamp.out", {a.tensor<float>({3}, {-30, 1, 7}), a.none(), a.i(2), up, up}));
  EXPECT_TRUE(tensor_matches<float>(up, {3}, {-30, 1, 2}, tol()));
}

TEST_P(ElementwiseTest, MaximumBroadcastsAndPropagatesNaN) {
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::maximum.out", {a.tensor<float>({2, 3}, {1, -5, 3, std::nanf(""), 0, -kInf}),
                                             a.tensor<float>({3}, {2, -6, 2}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 3}, {2, -5, 3, std::nanf(""), 0, 2}, tol()));
  auto* outi = a.out(kI64, {1});
  HF2PTE_EXPECT_ERROR(run("aten::maximum.out", {a.tensor<int64_t>({1}, {1}), a.tensor<int64_t>({1}, {2}), outi, outi}),
                      kNotSupported, "must be f32");
}

TEST_P(ElementwiseTest, PowTensorScalar) {
  auto* out = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::pow.Tensor_Scalar_out",
                       {a.tensor<float>({3}, {3, -1.5f, 0.5f}), a.i(2), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3}, {9, 2.25f, 0.25f}, tol()));
  auto* half = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::pow.Tensor_Scalar_out",
                       {a.tensor<float>({2}, {16, 2.25f}), a.d(0.5), half, half}));
  EXPECT_TRUE(tensor_matches<float>(half, {2}, {4, 1.5f}, tol()));
  auto* outi = a.out(kI64, {3});
  HF2PTE_EXPECT_OK(run("aten::pow.Tensor_Scalar_out",
                       {a.tensor<int64_t>({3}, {2, -3, 0}), a.i(3), outi, outi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {3}, {8, -27, 0}));
  // int64 tensor to a float power -> float.
  auto* outf = a.out(kF32, {1});
  HF2PTE_EXPECT_OK(run("aten::pow.Tensor_Scalar_out",
                       {a.tensor<int64_t>({1}, {9}), a.d(0.5), outf, outf}));
  EXPECT_TRUE(tensor_matches<float>(outf, {1}, {3}, tol()));
  HF2PTE_EXPECT_ERROR(run("aten::pow.Tensor_Scalar_out",
                          {a.tensor<int64_t>({1}, {2}), a.i(-1), outi, outi}),
                      kInvalidArgument, "negative integer powers");
}

TEST_P(ElementwiseTest, LeGivesBool) {
  auto* out = a.out(kBool, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::le.Tensor_out", {a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                                               a.tensor<float>({3}, {2, 2, 5}), out, out}));
  EXPECT_TRUE(tensor_matches<bool>(out, {2, 3}, {true, true, true, false, false, false}));
  // Mixed int64 / float compares in float.
  auto* out2 = a.out(kBool, {3});
  HF2PTE_EXPECT_OK(run("aten::le.Tensor_out", {a.tensor<int64_t>({3}, {1, 2, 3}),
                                               a.tensor<float>({}, {2.5f}), out2, out2}));
  EXPECT_TRUE(tensor_matches<bool>(out2, {3}, {true, true, false}));
  // Causal mask style: positions [3,1] <= [1,3].
  auto* mask = a.out(kBool, {3, 3});
  HF2PTE_EXPECT_OK(run("aten::le.Tensor_out", {a.tensor<int64_t>({1, 3}, {0, 1, 2}),
                                               a.tensor<int64_t>({3, 1}, {0, 1, 2}), mask, mask}));
  EXPECT_TRUE(tensor_matches<bool>(mask, {3, 3},
                                   {true, false, false, true, true, false, true, true, true}));
}

TEST_P(ElementwiseTest, Where) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::where.self_out",
                       {a.tensor<bool>({2, 1}, {true, false}), a.tensor<float>({2}, {1, 2}),
                        a.tensor<float>({}, {-kInf}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {1, 2, -kInf, -kInf}, tol()));
  auto* outi = a.out(kI64, {3});
  HF2PTE_EXPECT_OK(run("aten::where.self_out",
                       {a.tensor<bool>({3}, {true, false, true}), a.tensor<int64_t>({3}, {1, 2, 3}),
                        a.tensor<int64_t>({3}, {-1, -2, -3}), outi, outi}));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {3}, {1, -2, 3}));
  // Promotion: int64 and float branches -> float.
  auto* outf = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::where.self_out",
                       {a.tensor<bool>({2}, {false, true}), a.tensor<int64_t>({2}, {1, 2}),
                        a.tensor<float>({2}, {0.5f, 0.25f}), outf, outf}));
  EXPECT_TRUE(tensor_matches<float>(outf, {2}, {0.5f, 2}, tol()));
  HF2PTE_EXPECT_ERROR(run("aten::where.self_out",
                          {a.tensor<float>({2}, {1, 0}), a.tensor<float>({2}, {1, 2}),
                           a.tensor<float>({2}, {3, 4}), outf, outf}),
                      kInvalidArgument, "condition must be bool");
  HF2PTE_EXPECT_ERROR(run("aten::where.self_out",
                          {a.tensor<bool>({3}, B(3, true)), a.tensor<float>({2}, {1, 2}),
                           a.tensor<float>({2}, {3, 4}), outf, outf}),
                      kInvalidArgument, "cannot be broadcast");
}

TEST_P(ElementwiseTest, RandomBroadcastAndLayoutsMatchNaive) {
  // Random shapes (rank <= 5, broadcast dims, random dim orders for both
  // inputs and the out) against index arithmetic done the slow way; this
  // exercises the dim-merging strided loop on layouts hand tests miss.
  std::mt19937 rng(1234);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto random_order = [&](size_t rank) {
    std::vector<uint8_t> order(rank);
    std::iota(order.begin(), order.end(), uint8_t(0));
    std::shuffle(order.begin(), order.end(), rng);
    return order;
  };
  for (int iter = 0; iter < 200; ++iter) {
    const int rank = pick(0, 5);
    std::vector<int64_t> shape(static_cast<size_t>(rank)), sa, sb;
    for (auto& s : shape) s = pick(1, 4);
    // Each input drops some leading dims and sets some dims to 1.
    // One input has the full rank (the out's), the other any rank up to it.
    int ra = rank, rb = pick(0, rank);
    if (pick(0, 1) == 1) std::swap(ra, rb);
    for (int d = rank - ra; d < rank; ++d) sa.push_back(pick(0, 2) == 0 ? 1 : shape[size_t(d)]);
    for (int d = rank - rb; d < rank; ++d) sb.push_back(pick(0, 2) == 0 ? 1 : shape[size_t(d)]);
    auto numel = [](const std::vector<int64_t>& s) {
      return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<int64_t>());
    };
    std::vector<float> va(size_t(numel(sa))), vb(size_t(numel(sb)));
    for (auto& v : va) v = float(pick(-100, 100));
    for (auto& v : vb) v = float(pick(-100, 100));
    // The actual broadcast shape (a dim of 1 in both inputs stays 1).
    std::vector<int64_t> oshape(size_t(rank), 1);
    for (int d = 0; d < rank; ++d) {
      const int ia = d - (rank - ra), ib = d - (rank - rb);
      if (ia >= 0) oshape[size_t(d)] = std::max(oshape[size_t(d)], sa[size_t(ia)]);
      if (ib >= 0) oshape[size_t(d)] = std::max(oshape[size_t(d)], sb[size_t(ib)]);
    }
    std::vector<float> want;
    for (int64_t k = 0; k < numel(oshape); ++k) {
      // Unravel k over oshape, then ravel into each input with broadcasting.
      std::vector<int64_t> idx(static_cast<size_t>(rank));
      int64_t rem = k;
      for (int d = rank - 1; d >= 0; --d) {
        idx[size_t(d)] = rem % oshape[size_t(d)];
        rem /= oshape[size_t(d)];
      }
      auto ravel = [&](const std::vector<int64_t>& s) {
        int64_t off = 0;
        const int r = int(s.size());
        for (int d = 0; d < r; ++d) {
          const int64_t i = s[size_t(d)] == 1 ? 0 : idx[size_t(rank - r + d)];
          off = off * s[size_t(d)] + i;
        }
        return off;
      };
      want.push_back(va[size_t(ravel(sa))] + 2 * vb[size_t(ravel(sb))]);
    }
    auto* out = a.out(kF32, oshape, rt::ShapeDynamism::kDynamicBound, random_order(oshape.size()));
    HF2PTE_EXPECT_OK(run("aten::add.out", {a.tensor(sa, va, random_order(sa.size())),
                                           a.tensor(sb, vb, random_order(sb.size())), a.i(2),
                                           out, out}));
    ASSERT_TRUE(tensor_matches<float>(out, oshape, want, tol()))
        << "iteration " << iter << ": " << ::testing::PrintToString(sa) << " + "
        << ::testing::PrintToString(sb);
  }
}

TEST_P(ElementwiseTest, EmptyTensors) {
  auto* out = a.out(kF32, {0, 3});
  HF2PTE_EXPECT_OK(run("aten::mul.out", {a.tensor<float>({0, 3}, {}),
                                         a.tensor<float>({3}, {1, 2, 3}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {0, 3}, {}, tol()));
}

HF2PTE_INSTANTIATE_OP_TESTS(ElementwiseTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
