// sym_size.int and executorch_prim scalar arithmetic: Int/Double results
// written into the last slot, Python floor division.
#include <cmath>
#include <limits>

#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

class SymTest : public OpTest {
 protected:
  /// Runs a prim op on (x, y) and returns the out slot.
  rt::EValue* prim(std::string_view key, rt::EValue* x, rt::EValue* y) {
    rt::EValue* out = a.none();
    Status st = run(key, {x, y, out});
    EXPECT_TRUE(st.is_ok()) << st.message();
    return out;
  }
};

TEST_P(SymTest, SymSize) {
  auto* t = a.tensor<float>({2, 5, 3}, std::vector<float>(30, 0));
  auto* out = a.none();
  HF2PTE_EXPECT_OK(run("aten::sym_size.int", {t, a.i(1), out}));
  ASSERT_EQ(out->tag, rt::Tag::kInt);
  EXPECT_EQ(out->i, 5);
  HF2PTE_EXPECT_OK(run("aten::sym_size.int", {t, a.i(-1), out}));
  EXPECT_EQ(out->i, 3);
  HF2PTE_EXPECT_ERROR(run("aten::sym_size.int", {t, a.i(3), out}), kInvalidArgument,
                      "aten::sym_size.int: dim 3 out of range");
  HF2PTE_EXPECT_ERROR(run("aten::sym_size.int", {a.tensor<float>({}, {1}), a.i(0), out}),
                      kInvalidArgument, "0-dim");
  HF2PTE_EXPECT_ERROR(run("aten::sym_size.int", {a.i(1), a.i(0), out}), kInvalidProgram,
                      "aten::sym_size.int: self");
}

TEST_P(SymTest, IntArithmetic) {
  auto* s = prim("executorch_prim::add.Scalar", a.i(7), a.i(-3));
  ASSERT_EQ(s->tag, rt::Tag::kInt);
  EXPECT_EQ(s->i, 4);
  EXPECT_EQ(prim("executorch_prim::sub.Scalar", a.i(7), a.i(10))->i, -3);
  EXPECT_EQ(prim("executorch_prim::mul.Scalar", a.i(-4), a.i(6))->i, -24);
  // Wraps instead of overflowing (no UB).
  EXPECT_EQ(prim("executorch_prim::add.Scalar", a.i(std::numeric_limits<int64_t>::max()), a.i(1))->i,
            std::numeric_limits<int64_t>::min());
}

TEST_P(SymTest, DoubleArithmetic) {
  auto* s = prim("executorch_prim::add.Scalar", a.i(1), a.d(0.5));
  ASSERT_EQ(s->tag, rt::Tag::kDouble);
  EXPECT_EQ(s->d, 1.5);
  EXPECT_EQ(prim("executorch_prim::mul.Scalar", a.d(2.5), a.i(4))->d, 10.0);
  EXPECT_EQ(prim("executorch_prim::sub.Scalar", a.d(2.5), a.d(4))->d, -1.5);
}

TEST_P(SymTest, FloordivFollowsPython) {
  const char* k = "executorch_prim::floordiv.Scalar";
  EXPECT_EQ(prim(k, a.i(7), a.i(2))->i, 3);
  EXPECT_EQ(prim(k, a.i(-7), a.i(2))->i, -4);
  EXPECT_EQ(prim(k, a.i(7), a.i(-2))->i, -4);
  EXPECT_EQ(prim(k, a.i(-7), a.i(-2))->i, 3);
  EXPECT_EQ(prim(k, a.i(-8), a.i(2))->i, -4);
  EXPECT_EQ(prim(k, a.i(0), a.i(-3))->i, 0);
  auto* d = prim(k, a.d(-7.5), a.i(2));
  ASSERT_EQ(d->tag, rt::Tag::kDouble);
  EXPECT_EQ(d->d, -4.0);
  EXPECT_EQ(prim(k, a.d(1.0), a.d(0.1))->d, 9.0);  // Python: 1.0 // 0.1 == 9.0
  EXPECT_EQ(prim(k, a.d(7.0), a.d(-2.0))->d, -4.0);
  HF2PTE_EXPECT_ERROR(run(k, {a.i(1), a.i(0), a.none()}), kInvalidArgument, "division by zero");
  HF2PTE_EXPECT_ERROR(run(k, {a.d(1), a.d(0), a.none()}), kInvalidArgument, "division by zero");
  HF2PTE_EXPECT_ERROR(run(k, {a.i(std::numeric_limits<int64_t>::min()), a.i(-1), a.none()}),
                      kOutOfRange, "overflows");
}

TEST_P(SymTest, PrimRejectsNonNumbers) {
  HF2PTE_EXPECT_ERROR(run("executorch_prim::add.Scalar", {a.b(true), a.i(1), a.none()}),
                      kInvalidProgram, "must be Int or Double; got Bool and Int");
  HF2PTE_EXPECT_ERROR(run("executorch_prim::add.Scalar", {a.i(1), a.i(1)}), kInvalidProgram,
                      "expected 3");
}

TEST_P(SymTest, OutSlotUpdatesBoxedIntList) {
  // A boxed IntList item pointing at the out slot sees the new value, which is
  // how dynamic sizes flow into view_copy.
  auto* size_list = a.int_list({0, 2});
  rt::EValue* slot = size_list->items[0];
  HF2PTE_EXPECT_OK(run("executorch_prim::mul.Scalar", {a.i(3), a.i(1), slot}));
  auto* out = a.out(ScalarType::kFloat, {3, 2});
  HF2PTE_EXPECT_OK(run("aten::view_copy.out",
                       {a.tensor<float>({6}, {0, 1, 2, 3, 4, 5}), size_list, out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3, 2}, {0, 1, 2, 3, 4, 5}, tol()));
}

HF2PTE_INSTANTIATE_OP_TESTS(SymTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
