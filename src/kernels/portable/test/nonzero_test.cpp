// nonzero.out and masked_select.out: dtypes (NaN is non-zero, -0.0 is zero), C-order coordinates
// through any dim order, 0-dim and empty inputs, and an out planned too small
// for the data (an error before anything is written). Expected coordinates are
// written out by hand or by a plain loop over the logical indices.
#include "kernels/portable/test/op_test_util.h"

#include <limits>

namespace hf2pte::kernels::testing {
namespace {

constexpr auto kI64 = ScalarType::kLong;
using I = std::vector<int64_t>;

class NonzeroTest : public OpTest {
 protected:
  Status nonzero(rt::EValue* self, rt::EValue* out) { return run("aten::nonzero.out", {self, out, out}); }
};

TEST_P(NonzeroTest, FloatNanIsNonzeroAndNegativeZeroIsZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto* out = a.out(kI64, {6, 2});  // planned at the bound numel x rank
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>({2, 3}, {0.f, -0.f, nan, 1.5f, 0.f, -2.f}), out));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {3, 2}, {0, 2, 1, 0, 1, 2}));
}

TEST_P(NonzeroTest, BoolIntAndLongInputs) {
  auto* ob = a.out(kI64, {4, 1});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<bool>({4}, {true, false, false, true}), ob));
  EXPECT_TRUE(tensor_matches<int64_t>(ob, {2, 1}, {0, 3}));
  auto* oi = a.out(kI64, {8, 3});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<int32_t>({2, 2, 2}, {0, 7, 0, 0, -1, 0, 0, 3}), oi));
  EXPECT_TRUE(tensor_matches<int64_t>(oi, {3, 3}, {0, 0, 1, 1, 0, 0, 1, 1, 1}));
  auto* ol = a.out(kI64, {3, 1});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<int64_t>({3}, {0, 0, int64_t{1} << 40}), ol));
  EXPECT_TRUE(tensor_matches<int64_t>(ol, {1, 1}, {2}));
}

TEST_P(NonzeroTest, NoneAndAllNonzero) {
  auto* none = a.out(kI64, {6, 2});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>({3, 2}, {0, 0, 0, 0, 0, 0}), none));
  EXPECT_TRUE(tensor_matches<int64_t>(none, {0, 2}, {}));
  auto* all = a.out(kI64, {6, 2});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}), all));
  EXPECT_TRUE(tensor_matches<int64_t>(all, {6, 2}, {0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 2, 1}));
  // An empty input has nothing to report: [0, rank].
  auto* empty = a.out(kI64, {0, 2});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>({0, 4}, {}), empty));
  EXPECT_TRUE(tensor_matches<int64_t>(empty, {0, 2}, {}));
}

TEST_P(NonzeroTest, ZeroDimInputGivesZeroColumns) {
  auto* one = a.out(kI64, {1, 0});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>({}, {3.f}), one));
  EXPECT_TRUE(tensor_matches<int64_t>(one, {1, 0}, {}));
  auto* zero = a.out(kI64, {1, 0});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>({}, {0.f}), zero));
  EXPECT_TRUE(tensor_matches<int64_t>(zero, {0, 0}, {}));
}

// A channels-last style dim order: coordinates stay logical (C order), which a
// plain loop over the logical values computes independently.
TEST_P(NonzeroTest, StridedInputReportsLogicalCoordinates) {
  const I sizes{2, 3, 4};
  std::vector<float> v(24);
  for (size_t k = 0; k < v.size(); ++k) v[k] = (k * 7) % 5 == 0 ? 0.f : float(k);
  I want;
  int64_t count = 0;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 4; ++k) {
        if (v[size_t((i * 3 + j) * 4 + k)] != 0.f) want.insert(want.end(), {i, j, k}), ++count;
      }
    }
  }
  auto* out = a.out(kI64, {24, 3});
  HF2PTE_EXPECT_OK(nonzero(a.tensor<float>(sizes, v, {0, 2, 1}), out));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {count, 3}, want));
}

TEST_P(NonzeroTest, OutTooSmallOrWrongIsAnError) {
  // Planned for 2 rows; the data has 3 non-zeros: nothing past the capacity is written.
  auto* small = a.out(kI64, {2, 1});
  HF2PTE_EXPECT_ERROR(nonzero(a.tensor<float>({4}, {1, 0, 2, 3}), small), kOutOfRange, "aten::nonzero.out: out");
  EXPECT_EQ(small->tensor->size(0), 2);
  auto* wrong_dtype = a.out(ScalarType::kFloat, {4, 1});
  HF2PTE_EXPECT_ERROR(nonzero(a.tensor<float>({4}, {1, 0, 2, 3}), wrong_dtype), kInvalidArgument, "out must be i64");
  auto* wrong_rank = a.out(kI64, {4});
  HF2PTE_EXPECT_ERROR(nonzero(a.tensor<float>({4}, {1, 0, 2, 3}), wrong_rank), kInvalidProgram, "rank");
  auto* fixed = a.out(kI64, {4, 1}, rt::ShapeDynamism::kStatic);
  HF2PTE_EXPECT_ERROR(nonzero(a.tensor<float>({4}, {1, 0, 2, 3}), fixed), kInvalidArgument, "static");
}

// masked_select: self and mask broadcast; elements in row-major order of the broadcast shape.
TEST_P(NonzeroTest, MaskedSelectBroadcastsSelfAndMask) {
  auto* out = a.out(ScalarType::kFloat, {6});
  HF2PTE_EXPECT_OK(run("aten::masked_select.out", {a.tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                                                   a.tensor<bool>({3}, {true, false, true}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {4}, {1, 3, 4, 6}));
  // A mask of [2, 1] against self [3]: broadcast [2, 3], the second row selected.
  auto* rows = a.out(kI64, {6});
  HF2PTE_EXPECT_OK(run("aten::masked_select.out", {a.tensor<int64_t>({3}, {7, 8, 9}),
                                                   a.tensor<bool>({2, 1}, {false, true}), rows, rows}));
  EXPECT_TRUE(tensor_matches<int64_t>(rows, {3}, {7, 8, 9}));
  auto* none = a.out(ScalarType::kFloat, {3});
  HF2PTE_EXPECT_OK(run("aten::masked_select.out", {a.tensor<float>({3}, {1, 2, 3}),
                                                   a.tensor<bool>({3}, {false, false, false}), none, none}));
  EXPECT_TRUE(tensor_matches<float>(none, {0}, {}));
}

TEST_P(NonzeroTest, MaskedSelectErrors) {
  auto* self = a.tensor<float>({4}, {1, 2, 3, 4});
  auto* out = a.out(ScalarType::kFloat, {4});
  HF2PTE_EXPECT_ERROR(run("aten::masked_select.out", {self, a.tensor<float>({4}, {1, 0, 1, 1}), out, out}),
                      kInvalidArgument, "mask must be bool");
  auto* wrong = a.out(kI64, {4});
  HF2PTE_EXPECT_ERROR(run("aten::masked_select.out", {self, a.tensor<bool>({4}, {true, true, false, true}), wrong, wrong}),
                      kInvalidArgument, "out must have self's dtype");
  auto* small = a.out(ScalarType::kFloat, {2});
  HF2PTE_EXPECT_ERROR(run("aten::masked_select.out", {self, a.tensor<bool>({4}, {true, true, false, true}), small, small}),
                      kOutOfRange, "aten::masked_select.out: out");
  HF2PTE_EXPECT_ERROR(run("aten::masked_select.out", {self, a.tensor<bool>({3}, {true, true, false}), out, out}),
                      kInvalidArgument, "");
}

HF2PTE_INSTANTIATE_OP_TESTS(NonzeroTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
