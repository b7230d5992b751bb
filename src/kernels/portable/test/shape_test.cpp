// Data movement: view_copy, permute_copy, slice_copy, cat, clone and
// _to_dim_order_copy, including strided inputs/outs and dtype conversion.
#include <limits>

#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

using F = std::vector<float>;
constexpr auto kF32 = ScalarType::kFloat;
constexpr auto kI64 = ScalarType::kLong;
constexpr auto kBool = ScalarType::kBool;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

class ShapeTest : public OpTest {
 protected:
  rt::EValue* iota23() { return a.tensor<float>({2, 3}, {0, 1, 2, 3, 4, 5}); }
};

TEST_P(ShapeTest, ViewCopyInfersMinusOne) {
  auto* out = a.out(kF32, {3, 2});
  HF2PTE_EXPECT_OK(run("aten::view_copy.out", {iota23(), a.int_list({-1, 2}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3, 2}, {0, 1, 2, 3, 4, 5}, tol()));
  // From a non-contiguous input the logical order is kept.
  auto* x = a.tensor<int64_t>({2, 3}, {0, 1, 2, 3, 4, 5}, {1, 0});
  auto* flat = a.out(kI64, {6});
  HF2PTE_EXPECT_OK(run("aten::view_copy.out", {x, a.int_list({6}), flat, flat}));
  EXPECT_TRUE(tensor_matches<int64_t>(flat, {6}, {0, 1, 2, 3, 4, 5}));
}

TEST_P(ShapeTest, ViewCopyErrors) {
  auto* out = a.out(kF32, {4, 2});
  HF2PTE_EXPECT_ERROR(run("aten::view_copy.out", {iota23(), a.int_list({4, 2}), out, out}),
                      kInvalidArgument, "aten::view_copy.out: shape [4, 2] is invalid for input of size 6");
  HF2PTE_EXPECT_ERROR(run("aten::view_copy.out", {iota23(), a.int_list({-1, -1}), out, out}),
                      kInvalidArgument, "invalid for input of size 6");
  HF2PTE_EXPECT_ERROR(run("aten::view_copy.out", {iota23(), a.int_list({-1, 4}), out, out}),
                      kInvalidArgument, "invalid");
  auto* out3 = a.out(kF32, {1, 6, 1});
  HF2PTE_EXPECT_ERROR(run("aten::view_copy.out", {iota23(), a.int_list({6}), out3, out3}),
                      kInvalidProgram, "rank");
  auto* outi = a.out(kI64, {6});
  HF2PTE_EXPECT_ERROR(run("aten::view_copy.out", {iota23(), a.int_list({6}), outi, outi}),
                      kInvalidArgument, "out dtype must match self");
}

TEST_P(ShapeTest, PermuteCopy) {
  auto* out = a.out(kF32, {3, 2});
  HF2PTE_EXPECT_OK(run("aten::permute_copy.out", {iota23(), a.int_list({-1, 0}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3, 2}, {0, 3, 1, 4, 2, 5}, tol()));
  // [2, 1, 3] -> dims (2, 0, 1) -> [3, 2, 1]
  auto* b = a.tensor<bool>({2, 1, 3}, {true, false, false, false, true, true});
  auto* outb = a.out(kBool, {3, 2, 1});
  HF2PTE_EXPECT_OK(run("aten::permute_copy.out", {b, a.int_list({2, 0, 1}), outb, outb}));
  EXPECT_TRUE(tensor_matches<bool>(outb, {3, 2, 1}, {true, false, false, true, false, true}));
  HF2PTE_EXPECT_ERROR(run("aten::permute_copy.out", {iota23(), a.int_list({0, 0}), out, out}),
                      kInvalidArgument, "repeat dim 0");
  HF2PTE_EXPECT_ERROR(run("aten::permute_copy.out", {iota23(), a.int_list({0}), out, out}),
                      kInvalidArgument, "dims [0]");
  HF2PTE_EXPECT_ERROR(run("aten::permute_copy.out", {iota23(), a.int_list({0, 2}), out, out}),
                      kInvalidArgument, "dim 2 out of range");
}

TEST_P(ShapeTest, SliceCopy) {
  auto* x = a.tensor<int64_t>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto* out = a.out(kI64, {2, 5});
  // x[:, 1::2]
  HF2PTE_EXPECT_OK(
      run("aten::slice_copy.Tensor_out", {x, a.i(1), a.i(1), a.none(), a.i(2), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {2, 2}, {1, 3, 6, 8}));
  // x[:, -2:] with end = INT64_MAX (how "to the end" is exported).
  HF2PTE_EXPECT_OK(
      run("aten::slice_copy.Tensor_out", {x, a.i(-1), a.i(-2), a.i(kMax), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {2, 2}, {3, 4, 8, 9}));
  // Out-of-range bounds clamp: x[:, -100:3], x[1:100]
  HF2PTE_EXPECT_OK(
      run("aten::slice_copy.Tensor_out", {x, a.i(1), a.i(-100), a.i(3), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {2, 3}, {0, 1, 2, 5, 6, 7}));
  HF2PTE_EXPECT_OK(
      run("aten::slice_copy.Tensor_out", {x, a.i(0), a.i(1), a.i(100), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {1, 5}, {5, 6, 7, 8, 9}));
  // start past end -> empty.
  HF2PTE_EXPECT_OK(
      run("aten::slice_copy.Tensor_out", {x, a.i(1), a.i(4), a.i(2), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {2, 0}, {}));
  // None / None -> everything.
  HF2PTE_EXPECT_OK(
      run("aten::slice_copy.Tensor_out", {x, a.i(0), a.none(), a.none(), a.i(1), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // A middle dim (the K/V cache [kv, 0:end, head_dim]): outer and inner runs.
  auto* c = a.tensor<float>({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto* oc = a.out(kF32, {2, 3, 2});
  HF2PTE_EXPECT_OK(run("aten::slice_copy.Tensor_out", {c, a.i(1), a.i(1), a.i(3), a.i(1), oc, oc}));
  EXPECT_TRUE(tensor_matches<float>(oc, {2, 2, 2}, {2, 3, 4, 5, 8, 9, 10, 11}));
  HF2PTE_EXPECT_OK(run("aten::slice_copy.Tensor_out", {c, a.i(-2), a.i(0), a.i(1), a.i(1), oc, oc}));
  EXPECT_TRUE(tensor_matches<float>(oc, {2, 1, 2}, {0, 1, 6, 7}));
}

TEST_P(ShapeTest, SliceCopyErrors) {
  auto* out = a.out(kF32, {2, 3});
  HF2PTE_EXPECT_ERROR(run("aten::slice_copy.Tensor_out",
                          {iota23(), a.i(1), a.none(), a.none(), a.i(0), out, out}),
                      kInvalidArgument, "step must be positive");
  HF2PTE_EXPECT_ERROR(run("aten::slice_copy.Tensor_out",
                          {iota23(), a.i(-3), a.none(), a.none(), a.i(1), out, out}),
                      kInvalidArgument, "dim -3 out of range");
  auto* o0 = a.out(kF32, {});
  HF2PTE_EXPECT_ERROR(run("aten::slice_copy.Tensor_out",
                          {a.tensor<float>({}, {1}), a.i(0), a.none(), a.none(), a.i(1), o0, o0}),
                      kInvalidArgument, "0-dim");
}

TEST_P(ShapeTest, CatNegativeDimAndSkipsEmpty) {
  auto* out = a.out(kF32, {2, 5});
  HF2PTE_EXPECT_OK(run("aten::cat.out",
                       {a.tensor_list({iota23(), a.tensor<float>({0}, {}),
                                       a.tensor<float>({2, 2}, {10, 11, 12, 13})}),
                        a.i(-1), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 5}, {0, 1, 2, 10, 11, 3, 4, 5, 12, 13}, tol()));
  auto* rows = a.out(kF32, {3, 3});
  HF2PTE_EXPECT_OK(run("aten::cat.out",
                       {a.tensor_list({iota23(), a.tensor<float>({1, 3}, {6, 7, 8})}), a.i(0),
                        rows, rows}));
  EXPECT_TRUE(tensor_matches<float>(rows, {3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}, tol()));
  // Mixed int64 / float inputs into a float out.
  auto* mixed = a.out(kF32, {3});
  HF2PTE_EXPECT_OK(run("aten::cat.out",
                       {a.tensor_list({a.tensor<int64_t>({2}, {1, 2}), a.tensor<float>({1}, {0.5f})}),
                        a.i(0), mixed, mixed}));
  EXPECT_TRUE(tensor_matches<float>(mixed, {3}, {1, 2, 0.5f}, tol()));
}

TEST_P(ShapeTest, CatErrors) {
  auto* out = a.out(kF32, {4, 3});
  HF2PTE_EXPECT_ERROR(run("aten::cat.out",
                          {a.tensor_list({iota23(), a.tensor<float>({2, 2}, {1, 2, 3, 4})}),
                           a.i(0), out, out}),
                      kInvalidArgument, "sizes of tensors must match except in dimension 0");
  HF2PTE_EXPECT_ERROR(run("aten::cat.out",
                          {a.tensor_list({iota23(), a.tensor<float>({3}, {1, 2, 3})}), a.i(0),
                           out, out}),
                      kInvalidArgument, "same rank");
  HF2PTE_EXPECT_ERROR(
      run("aten::cat.out", {a.tensor_list({iota23()}), a.i(2), out, out}), kInvalidArgument,
      "dim 2 out of range");
  auto* outi = a.out(kI64, {2, 3});
  HF2PTE_EXPECT_ERROR(run("aten::cat.out", {a.tensor_list({iota23()}), a.i(0), outi, outi}),
                      kInvalidArgument, "cannot be cast to out dtype i64");
  auto* small = a.out(kF32, {3, 3});
  HF2PTE_EXPECT_ERROR(run("aten::cat.out", {a.tensor_list({iota23(), iota23()}), a.i(0), small,
                                            small}),
                      kOutOfRange, "aten::cat.out");
}

TEST_P(ShapeTest, CloneIntoChannelsLastOut) {
  // A [1, 2, 2, 2] tensor cloned into an out planned channels-last: logical
  // values match; memory holds them in NHWC order.
  auto* x = a.tensor<float>({1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto* out = a.out(kF32, {1, 2, 2, 2}, rt::ShapeDynamism::kStatic, {0, 2, 3, 1});
  HF2PTE_EXPECT_OK(run("aten::clone.out", {x, a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}, tol()));
  const float* mem = out->tensor->data<float>();
  EXPECT_EQ(std::vector<float>(mem, mem + 8), (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}));
  HF2PTE_EXPECT_ERROR(run("aten::clone.out", {x, a.i(2), out, out}), kNotSupported,
                      "memory_format 2");
  auto* outi = a.out(kI64, {1, 2, 2, 2});
  HF2PTE_EXPECT_ERROR(run("aten::clone.out", {x, a.none(), outi, outi}), kInvalidArgument,
                      "out dtype must match self; expected f32, got i64");
}

TEST_P(ShapeTest, ToDimOrderCopyConvertsDtype) {
  auto* out = a.out(kI64, {4});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out",
                       {a.tensor<float>({4}, {1.5f, -2.5f, 3, 0}), a.b(false), a.none(), out, out}));
  EXPECT_TRUE(tensor_matches<int64_t>(out, {4}, {1, -2, 3, 0}));
  auto* outf = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out",
                       {a.tensor<bool>({2, 2}, {true, false, false, true}), a.b(false),
                        a.int_list({0, 1}), outf, outf}));
  EXPECT_TRUE(tensor_matches<float>(outf, {2, 2}, {1, 0, 0, 1}, tol()));
  auto* outb = a.out(kBool, {3});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out",
                       {a.tensor<int64_t>({3}, {0, 7, -1}), a.b(false), a.int_list({}), outb,
                        outb}));
  EXPECT_TRUE(tensor_matches<bool>(outb, {3}, {false, true, true}));
}

TEST_P(ShapeTest, ToDimOrderCopyLayouts) {
  auto* x = a.tensor<float>({1, 2, 1, 2}, {0, 1, 2, 3});
  auto* cl = a.out(kF32, {1, 2, 1, 2}, rt::ShapeDynamism::kStatic, {0, 2, 3, 1});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out",
                       {x, a.b(false), a.int_list({0, 2, 3, 1}), cl, cl}));
  EXPECT_TRUE(tensor_matches<float>(cl, {1, 2, 1, 2}, {0, 1, 2, 3}, tol()));
  HF2PTE_EXPECT_ERROR(run("dim_order_ops::_to_dim_order_copy.out",
                          {x, a.b(false), a.none(), cl, cl}),
                      kInvalidArgument, "contiguous");
  auto* contig = a.out(kF32, {1, 2, 1, 2});
  HF2PTE_EXPECT_ERROR(run("dim_order_ops::_to_dim_order_copy.out",
                          {x, a.b(false), a.int_list({0, 2, 3, 1}), contig, contig}),
                      kInvalidArgument, "does not match");
}

HF2PTE_INSTANTIATE_OP_TESTS(ShapeTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
