#include <gtest/gtest.h>

#include "core/scalar_type.h"
#include "core/status.h"

namespace hf2pte {
namespace {

TEST(Status, ContextIsAppendedInsideParens) {
  Status s(ErrorCode::kInvalidInput, "bad shape (model.safetensors)");
  EXPECT_EQ(s.with_context("tensor x").message(), "bad shape (model.safetensors, tensor x)");
  Status t(ErrorCode::kInvalidInput, "bad shape");
  EXPECT_EQ(t.with_context("f").message(), "bad shape (f)");
}

TEST(Result, CarriesValueOrStatus) {
  Result<int> ok = 3;
  Result<int> bad = Status(ErrorCode::kNotFound, "nope");
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(*ok, 3);
  EXPECT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kNotFound);
}

TEST(ScalarType, HalfAndBf16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  for (float f : {0.0f, 1.0f, -2.5f, 0x1p100f}) {
    EXPECT_EQ(bf16_to_float(float_to_bf16(f)), f) << f;
  }
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3F80);  // ties to even
}

}  // namespace
}  // namespace hf2pte
