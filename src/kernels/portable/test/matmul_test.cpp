// mm / bmm / addmm: shapes, strided operands, bias broadcasting, beta/alpha
// and double accumulation.
#include <cmath>
#include <limits>

#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

constexpr auto kF32 = ScalarType::kFloat;

class MatmulTest : public OpTest {
 protected:
  // [[1, 2, 3], [4, 5, 6]] and [[7, 8], [9, 10], [11, 12]]; product [[58, 64], [139, 154]].
  rt::EValue* lhs() { return a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}); }
  rt::EValue* rhs() { return a.tensor<float>({3, 2}, {7, 8, 9, 10, 11, 12}); }
};

TEST_P(MatmulTest, Mm) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::mm.out", {lhs(), rhs(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {58, 64, 139, 154}, tol()));
}

TEST_P(MatmulTest, MmStridedOperandsAndOut) {
  // mat2 stored transposed (dim order [1, 0], as permute would leave it) and
  // a column-major out.
  auto* b = a.tensor<float>({3, 2}, {7, 8, 9, 10, 11, 12}, {1, 0});
  auto* out = a.out(kF32, {2, 2}, rt::ShapeDynamism::kDynamicBound, {1, 0});
  HF2PTE_EXPECT_OK(run("aten::mm.out", {lhs(), b, out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {58, 64, 139, 154}, tol()));
}

TEST_P(MatmulTest, MmAccumulatesInDouble) {
  if (GetParam().name != "portable") GTEST_SKIP() << "only the reference kernels accumulate in double";
  // 1e8 + 1 - 1e8 + 1 is 2 in exact arithmetic; a float32 running sum gives 1.
  auto* out = a.out(kF32, {1, 1});
  HF2PTE_EXPECT_OK(run("aten::mm.out", {a.tensor<float>({1, 4}, {1e8f, 1, -1e8f, 1}),
                                        a.tensor<float>({4, 1}, {1, 1, 1, 1}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {1, 1}, {2}, tol()));
}

TEST_P(MatmulTest, MmPropagatesNonFinite) {
  // 0 * inf is NaN: zeros in self must not short-circuit.
  const float inf = std::numeric_limits<float>::infinity();
  auto* out = a.out(kF32, {1, 1});
  HF2PTE_EXPECT_OK(run("aten::mm.out", {a.tensor<float>({1, 2}, {0, 1}),
                                        a.tensor<float>({2, 1}, {inf, 1}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {1, 1}, {std::nanf("")}, tol()));
}

TEST_P(MatmulTest, MmEmptyInnerDim) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(
      run("aten::mm.out", {a.tensor<float>({2, 0}, {}), a.tensor<float>({0, 2}, {}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {0, 0, 0, 0}, tol()));
}

TEST_P(MatmulTest, MmErrors) {
  auto* out = a.out(kF32, {2, 5});
  HF2PTE_EXPECT_ERROR(run("aten::mm.out", {a.tensor<float>({2, 3}, std::vector<float>(6, 1)),
                                           a.tensor<float>({4, 5}, std::vector<float>(20, 1)),
                                           out, out}),
                      kInvalidArgument, "aten::mm.out: shapes [2, 3] and [4, 5] cannot be multiplied");
  HF2PTE_EXPECT_ERROR(run("aten::mm.out", {a.tensor<float>({3}, {1, 2, 3}), rhs(), out, out}),
                      kInvalidArgument, "self must have rank 2");
  auto* outi = a.out(ScalarType::kLong, {1, 1});
  HF2PTE_EXPECT_ERROR(run("aten::mm.out", {a.tensor<int64_t>({1, 1}, {1}),
                                           a.tensor<int64_t>({1, 1}, {1}), outi, outi}),
                      kNotSupported, "aten::mm.out: self has dtype i64");
  auto* small = a.out(kF32, {1, 2});
  HF2PTE_EXPECT_ERROR(run("aten::mm.out", {lhs(), rhs(), small, small}), kOutOfRange,
                      "aten::mm.out");
}

TEST_P(MatmulTest, Bmm) {
  // Batch 0: lhs @ rhs; batch 1: identity-ish [[1,0,0],[0,1,0]] @ rhs = first two rows of rhs.
  auto* x = a.tensor<float>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  auto* y = a.tensor<float>({2, 3, 2}, {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12});
  auto* out = a.out(kF32, {2, 2, 2});
  HF2PTE_EXPECT_OK(run("aten::bmm.out", {x, y, out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2, 2}, {58, 64, 139, 154, 7, 8, 9, 10}, tol()));
}

TEST_P(MatmulTest, BmmTransposedMat2) {
  // mat2 [2, 3, 2] stored as [2, 2, 3] (dim order [0, 2, 1]), as attention's k^T can be.
  auto* x = a.tensor<float>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  auto* y = a.tensor<float>({2, 3, 2}, {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12}, {0, 2, 1});
  auto* out = a.out(kF32, {2, 2, 2});
  HF2PTE_EXPECT_OK(run("aten::bmm.out", {x, y, out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2, 2}, {58, 64, 139, 154, 7, 8, 9, 10}, tol()));
}

TEST_P(MatmulTest, BmmErrors) {
  auto* out = a.out(kF32, {2, 2, 2});
  HF2PTE_EXPECT_ERROR(run("aten::bmm.out", {a.tensor<float>({2, 2, 3}, std::vector<float>(12, 1)),
                                            a.tensor<float>({3, 3, 2}, std::vector<float>(18, 1)),
                                            out, out}),
                      kInvalidArgument, "batch sizes");
  HF2PTE_EXPECT_ERROR(run("aten::bmm.out", {a.tensor<float>({2, 2, 3}, std::vector<float>(12, 1)),
                                            a.tensor<float>({2, 2, 2}, std::vector<float>(8, 1)),
                                            out, out}),
                      kInvalidArgument, "shapes [2, 2, 3] and [2, 2, 2] cannot be multiplied");
  HF2PTE_EXPECT_ERROR(run("aten::bmm.out", {lhs(), rhs(), out, out}), kInvalidArgument,
                      "rank 3");
}

TEST_P(MatmulTest, AddmmBiasBroadcast) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::addmm.out",
                       {a.tensor<float>({2}, {1, -1}), lhs(), rhs(), a.i(1), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {59, 63, 140, 153}, tol()));
  // Column bias [2, 1] with beta and alpha.
  auto* out2 = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::addmm.out", {a.tensor<float>({2, 1}, {10, 20}), lhs(), rhs(),
                                           a.d(0.5), a.i(2), out2, out2}));
  EXPECT_TRUE(tensor_matches<float>(out2, {2, 2}, {121, 133, 288, 318}, tol()));
}

TEST_P(MatmulTest, AddmmBetaZeroIgnoresSelf) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::addmm.out", {a.tensor<float>({2, 2}, std::vector<float>(4, std::nanf(""))),
                                           lhs(), rhs(), a.i(0), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2}, {58, 64, 139, 154}, tol()));
}

TEST_P(MatmulTest, AddmmErrors) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_ERROR(run("aten::addmm.out", {a.tensor<float>({3}, {1, 2, 3}), lhs(), rhs(),
                                              a.i(1), a.i(1), out, out}),
                      kInvalidArgument, "self [3] cannot be broadcast to [2, 2]");
  HF2PTE_EXPECT_ERROR(run("aten::addmm.out", {a.tensor<float>({2}, {1, 2}), lhs(), lhs(), a.i(1),
                                              a.i(1), out, out}),
                      kInvalidArgument, "cannot be multiplied");
}

HF2PTE_INSTANTIATE_OP_TESTS(MatmulTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
