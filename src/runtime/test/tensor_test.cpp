// Tensor shape rules: STATIC is fixed, DYNAMIC_BOUND resizes within capacity,
// strides follow dim_order.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/evalue.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace hf2pte::rt {
namespace {

TEST(TensorTest, StaticAcceptsOnlyItsShape) {
  float buf[6];
  Tensor t(ScalarType::kFloat, {2, 3}, {}, buf, sizeof buf, ShapeDynamism::kStatic);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  std::vector<int64_t> same{2, 3};
  EXPECT_TRUE(t.resize(same).is_ok());
  std::vector<int64_t> smaller{1, 3};
  Status st = t.resize(smaller);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("static"), std::string::npos) << st.message();
  EXPECT_EQ(t.size(0), 2);
}

TEST(TensorTest, DynamicBoundResizesWithinCapacity) {
  float buf[8];
  Tensor t(ScalarType::kFloat, {2, 4}, {}, buf, sizeof buf, ShapeDynamism::kDynamicBound);
  std::vector<int64_t> s1{1, 3};
  ASSERT_TRUE(t.resize(s1).is_ok());
  EXPECT_EQ(t.numel(), 3);
  EXPECT_EQ(t.strides()[0], 3);
  EXPECT_EQ(t.strides()[1], 1);
  // Same numel, different per-dim sizes: fits the capacity, so accepted (as in ExecuTorch).
  std::vector<int64_t> s2{4, 2};
  EXPECT_TRUE(t.resize(s2).is_ok());
  std::vector<int64_t> too_big{3, 3};
  Status st = t.resize(too_big);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(t.numel(), 8);  // unchanged on failure
  std::vector<int64_t> wrong_rank{8};
  EXPECT_FALSE(t.resize(wrong_rank).is_ok());
  std::vector<int64_t> negative{-1, 2};
  EXPECT_FALSE(t.resize(negative).is_ok());
  std::vector<int64_t> zero{0, 4};
  ASSERT_TRUE(t.resize(zero).is_ok());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
}

TEST(TensorTest, DynamicBoundRejectsOverflowingShape) {
  float buf[8];
  Tensor t(ScalarType::kFloat, {2, 2, 2}, {}, buf, sizeof buf, ShapeDynamism::kDynamicBound);
  std::vector<int64_t> huge{int64_t(1) << 40, int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(t.resize(huge).code(), ErrorCode::kOutOfRange);
}

TEST(TensorTest, StridesFollowDimOrder) {
  // Channels-last NCHW: dim_order [0, 2, 3, 1].
  Tensor t(ScalarType::kFloat, {2, 3, 4, 5}, {0, 2, 3, 1}, nullptr, 0, ShapeDynamism::kStatic);
  EXPECT_FALSE(t.is_contiguous());
  std::vector<int64_t> expected{60, 1, 15, 3};
  EXPECT_EQ(std::vector<int64_t>(t.strides().begin(), t.strides().end()), expected);

  Tensor c(ScalarType::kFloat, {2, 3, 4}, {}, nullptr, 0, ShapeDynamism::kStatic);
  EXPECT_TRUE(c.is_contiguous());
  std::vector<int64_t> cs{12, 4, 1};
  EXPECT_EQ(std::vector<int64_t>(c.strides().begin(), c.strides().end()), cs);

  Tensor scalar(ScalarType::kLong, {}, {}, nullptr, 0, ShapeDynamism::kStatic);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.dim(), 0);
}

TEST(TensorTest, ResizeRecomputesStrides) {
  float buf[24];
  Tensor t(ScalarType::kFloat, {2, 3, 4}, {}, buf, sizeof buf, ShapeDynamism::kDynamicBound);
  std::vector<int64_t> s{2, 2, 2};
  ASSERT_TRUE(t.resize(s).is_ok());
  std::vector<int64_t> expected{4, 2, 1};
  EXPECT_EQ(std::vector<int64_t>(t.strides().begin(), t.strides().end()), expected);
}

TEST(TensorTest, StridedViewReadsInPlaceUntilResized) {
  float cache[2 * 5 * 3];  // [2, 5, 3]: the view is its rows 0..1 of each batch
  float own[2 * 5 * 3];
  Tensor t(ScalarType::kFloat, {2, 5, 3}, {}, own, sizeof own, ShapeDynamism::kDynamicBound);
  const std::vector<int64_t> sizes{2, 2, 3}, strides{15, 3, 1};
  t.set_strided_view(cache, sizes, strides);
  EXPECT_TRUE(t.is_strided_view());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.raw_data(), static_cast<void*>(cache));
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.strides()[0], 15);
  EXPECT_EQ(t.own_capacity_bytes(), sizeof own);
  // Any resize, even to the view's own shape, gives the tensor its memory back
  // and dense strides, so a kernel writing it never writes the viewed bytes.
  ASSERT_TRUE(t.resize(sizes).is_ok());
  EXPECT_FALSE(t.is_strided_view());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.raw_data(), static_cast<void*>(own));
  EXPECT_EQ(t.strides()[0], 6);
  EXPECT_EQ(t.capacity_bytes(), sizeof own);
}

TEST(EValueTest, ArgHelpersNameTheArgument) {
  EValue i = EValue::from_int(3);
  auto r = arg_tensor(&i, "argument 'other' of aten::add.out");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_EQ(r.status().message(), "argument 'other' of aten::add.out: expected Tensor, got Int");
  EXPECT_EQ(*arg_int(&i, "x"), 3);
  EXPECT_DOUBLE_EQ(*arg_double(&i, "x"), 3.0);
  EXPECT_FALSE(arg_bool(&i, "x").is_ok());
  EXPECT_FALSE(arg_int(nullptr, "x").is_ok());

  EValue a = EValue::from_int(2), b = EValue::from_int(5);
  EValue list;
  list.tag = Tag::kIntList;
  list.items = {&a, &b};
  std::vector<int64_t> out;
  ASSERT_TRUE(arg_int_list(&list, "dims", &out).is_ok());
  EXPECT_EQ(out, (std::vector<int64_t>{2, 5}));
  EValue none;
  bool is_none = false;
  EXPECT_FALSE(arg_int_list(&none, "dims", &out).is_ok());
  ASSERT_TRUE(arg_int_list(&none, "dims", &out, true, &is_none).is_ok());
  EXPECT_TRUE(is_none);

  Tensor t(ScalarType::kFloat, {1}, {}, nullptr, 0, ShapeDynamism::kStatic);
  EValue tv;
  tv.tag = Tag::kTensor;
  tv.tensor = &t;
  EValue opt;
  opt.tag = Tag::kOptionalTensorList;
  opt.items = {&tv, nullptr, &none};
  std::vector<Tensor*> ts;
  ASSERT_TRUE(arg_tensor_list(&opt, "indices", &ts).is_ok());
  EXPECT_EQ(ts, (std::vector<Tensor*>{&t, nullptr, nullptr}));
  EValue tl;
  tl.tag = Tag::kTensorList;
  tl.items = {&tv, &none};
  EXPECT_FALSE(arg_tensor_list(&tl, "tensors", &ts).is_ok());
}

TEST(KernelRegistryTest, FindsByFullKey) {
  KernelRegistry r;
  r.register_kernel("aten::add.out", [](KernelContext&, std::span<EValue*>) { return Status::ok(); });
  EXPECT_NE(r.find("aten::add.out"), nullptr);
  EXPECT_EQ(r.find("aten::add"), nullptr);
  EXPECT_EQ(r.size(), 1u);
}

}  // namespace
}  // namespace hf2pte::rt
