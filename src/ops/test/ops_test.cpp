#include <gtest/gtest.h>

#include "ops/op_table.h"

namespace hf2pte {
namespace {

TEST(OpTable, EverySchemaParses) {
  for (const auto& op : all_ops()) {
    EXPECT_TRUE(parse_schema(op.schema_text).has_value()) << op.kernel_key();
  }
}

TEST(OpTable, OutVariantsHaveOutArgs) {
  for (const auto& op : all_ops()) {
    const auto& s = op_schema(op.id);
    bool out_overload = op.overload.ends_with("out");
    EXPECT_EQ(out_overload, s.num_outs() > 0) << op.kernel_key();
  }
}

TEST(OpSchema, AddOutMatchesUpstreamArgConvention) {
  // aten::add.out(self, other, *, alpha=1, out) -> args [self, other, alpha, out] + return slot.
  const auto& s = op_schema(OpId::AddOut);
  ASSERT_EQ(s.args.size(), 4u);
  EXPECT_EQ(s.args[2].name, "alpha");
  EXPECT_EQ(s.args[2].default_value, "1");
  EXPECT_TRUE(s.args[3].is_out);
  EXPECT_EQ(s.num_outs(), 1u);
}

TEST(OpSchema, ParsesOptionalListsAndMutation) {
  const auto& s = op_schema(OpId::IndexPut_);
  ASSERT_EQ(s.args.size(), 4u);
  EXPECT_TRUE(s.args[0].mutated);
  EXPECT_FALSE(s.args[0].is_out);
  EXPECT_EQ(s.args[1].type, ArgType::kOptionalTensorList);
  const auto& m = op_schema(OpId::MeanOut);
  EXPECT_EQ(m.args[1].type, ArgType::kIntList);
  EXPECT_TRUE(m.args[1].optional);
  EXPECT_EQ(m.args[3].type, ArgType::kScalarType);
}

TEST(OpTable, FindsByKernelKey) {
  EXPECT_EQ(find_op("aten::add.out"), OpId::AddOut);
  EXPECT_EQ(find_op("aten::index_put_"), OpId::IndexPut_);
  EXPECT_FALSE(find_op("aten::nope.out").has_value());
}

}  // namespace
}  // namespace hf2pte
