#include <gtest/gtest.h>

#include "graph/graph.h"
#include "graph/shapes.h"

namespace hf2pte::graph {
namespace {

TEST(SymInt, SimplifiesAndBounds) {
  SymInt s = SymInt::dim("seq");
  DimRanges r{{"seq", {1, 512}}};
  EXPECT_EQ((s * 1).str(), "seq");
  EXPECT_EQ((s + 0).str(), "seq");
  EXPECT_EQ((s * 2 * 3).str(), "(seq * 6)");
  EXPECT_EQ((2 * s).str(), "(seq * 2)");
  EXPECT_EQ((s - s).str(), "0");
  EXPECT_EQ(((s + 1) - 1).str(), "seq");  // an end sliced back by its own offset
  EXPECT_EQ(((s + 3) - 1).str(), "(seq + 2)");
  EXPECT_EQ(((s + 1) - 1).evaluate({{"seq", 9}}), 9);
  EXPECT_TRUE((s * 2 + 1) == (SymInt::dim("seq") * 2 + 1));  // structural, not by identity
  EXPECT_FALSE((s * 2 + 1) == (s * 2 + 2));
  EXPECT_EQ((s * 2 + 1).hash(), (SymInt::dim("seq") * 2 + 1).hash());
  EXPECT_EQ((s * 4).upper_bound(r), 2048);
  EXPECT_EQ((s * 4).lower_bound(r), 4);
  EXPECT_EQ(ceildiv(s, 4).upper_bound(r), 128);
  EXPECT_EQ(floordiv(s * 3, 2).evaluate({{"seq", 5}}), 7);
  EXPECT_EQ(mod(SymInt(-7), SymInt(3)).constant_value(), 2);  // Python floor semantics
  EXPECT_FALSE(s.evaluate({}).has_value());
}

TEST(Graph, InfersShapesAndPrints) {
  Graph g;
  SymInt seq = g.add_dim("seq", 1, 16);
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {seq, 8}, {}});
  ValueId w = g.add_constant("w", ConstantData::from_bytes(ScalarType::kFloat, {4, 8}, std::vector<uint8_t>(128), "test"));
  auto y = g.add(OpId::Linear, {x, w}, "proj");
  ASSERT_TRUE(y.is_ok()) << y.status().message();
  EXPECT_EQ(g.type(*y).str(), "f32[seq, 4]");
  // Defaults are materialised: linear(input, weight, bias=None).
  EXPECT_EQ(g.nodes().back().args.size(), 3u);
  auto bad = g.add(OpId::MmOut, {x, x}, "bad");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("node bad"), std::string::npos);
  g.set_outputs({*y});
  std::string text = g.to_string();
  EXPECT_NE(text.find("%proj: f32[seq, 4] = linear(input=%x, weight=%w, bias=None)"), std::string::npos) << text;
  EXPECT_EQ(g.dim_sources().at("seq").input, x);
}

TEST(Shapes, BroadcastAndSlice) {
  SymInt s = SymInt::dim("s");
  auto b = broadcast_shapes({s, 1, 8}, {4, 1});
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->at(0).str(), "s");
  EXPECT_EQ(b->at(1).str(), "4");
  EXPECT_FALSE(broadcast_shapes({3}, {4}).is_ok());
  Graph g;
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {2, 10}, {}});
  auto sl = g.add(OpId::SliceCopyTensorOut, {x, int64_t{1}, SymInt(-4), None{}}, "tail");
  ASSERT_TRUE(sl.is_ok()) << sl.status().message();
  EXPECT_EQ(g.type(*sl).str(), "f32[2, 4]");
}

}  // namespace
}  // namespace hf2pte::graph
