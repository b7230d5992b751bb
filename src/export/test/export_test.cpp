#include <gtest/gtest.h>

#include <cstring>

#include "export/decompositions.h"
#include "graph/constant.h"
#include "export/emit.h"
#include "export/memory_plan.h"
#include "export/pipeline.h"
#include "export/stages.h"

namespace hf2pte::exp {
namespace {

using graph::ConstantData;
using graph::Graph;
using graph::IntList;
using graph::SymInt;
using graph::TensorType;

ConstantData zeros(std::vector<int64_t> sizes) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return ConstantData::from_bytes(ScalarType::kFloat, sizes, std::vector<uint8_t>(size_t(n) * 4), "zeros");
}

TEST(ProgramFixes, UnboundedCapFollowsTheSeed) {
  // floor = clamp(round(2^24^(1/N)), 64, 1024): N=1 -> 1024, N=2 -> 1024 (4096 clamped), N=3 -> 256, N=4 -> 64.
  EXPECT_EQ(unbounded_dim_cap(2, 1, 1), 1024);
  EXPECT_EQ(unbounded_dim_cap(2, 1, 3), 256);
  EXPECT_EQ(unbounded_dim_cap(2, 1, 4), 64);
  EXPECT_EQ(unbounded_dim_cap(2, 1, 6), 64);
  EXPECT_EQ(unbounded_dim_cap(500, 1, 1), 2000);  // lower * 4 wins
}

TEST(ProgramFixes, CapsUnboundedDimsWithOneWarning) {
  graph::Program p;
  p.methods.emplace_back("forward");
  auto& g = p.methods[0];
  SymInt s = g.add_dim("seq", 1, graph::DimRange::kUnbounded);
  g.set_outputs({g.add_input("x", TensorType{ScalarType::kFloat, {s}, {}})});
  StageLog log;
  ASSERT_TRUE(run_program_fixes(p, ExportConfig{}, log).is_ok());
  EXPECT_EQ(g.dims().at("seq").max, 1024);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_NE(log.warnings[0].find("seq -> [1, 1024]"), std::string::npos) << log.warnings[0];
}

TEST(NodeFixes, NormalisesNegativeDims) {
  graph::Program p;
  p.methods.emplace_back("forward");
  auto& g = p.methods[0];
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {2, 3, 4}, {}});
  auto y = g.add(OpId::SoftmaxOut, {x, int64_t{-1}, false}, "sm");
  ASSERT_TRUE(y.is_ok());
  auto m = g.add(OpId::MeanOut, {*y, IntList{-2}, true}, "mean");
  ASSERT_TRUE(m.is_ok());
  StageLog log;
  ASSERT_TRUE(run_node_fixes(p, ExportConfig{}, log).is_ok());
  EXPECT_EQ(std::get<int64_t>(g.nodes()[0].args[1]), 2);
  EXPECT_EQ(std::get<IntList>(g.nodes()[1].args[1])[0].constant_value(), 1);
}

TEST(Decompositions, LinearBecomesMmWithTransposedConstant) {
  Graph g;
  SymInt s = g.add_dim("seq", 1, 8);
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {s, 4}, {}});
  auto w = g.add_constant("w", zeros({3, 4}));
  auto y = g.add(OpId::Linear, {x, w}, "proj");
  ASSERT_TRUE(y.is_ok());
  g.set_outputs({*y});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok()) << counts.status().message();
  EXPECT_EQ(counts->at("linear_to_mm"), 1);
  // A plain constant has no streamed transposed form: a runtime permute appears.
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0].op, OpId::PermuteCopyOut);
  EXPECT_EQ(g.nodes()[1].op, OpId::MmOut);
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "f32[seq, 3]");
}

TEST(Decompositions, CheckpointWeightsAreTransposedWhileStreaming) {
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i);  // [[0..3], [4..7], [8..11]]
  graph::ConstantRecipe r;
  r.source = {"w", ScalarType::kFloat, {3, 4}, {reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4}, nullptr};
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {2, 4}, {}});
  auto wid = g.add_constant("w", graph::make_constant(r));
  g.set_outputs({*g.add(OpId::Linear, {x, wid}, "proj")});
  ASSERT_TRUE(rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable)).is_ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  auto wt = std::get<graph::ValueId>(g.nodes()[0].args[1]);
  const auto& c = g.constant(wt);
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{4, 3}));
  std::vector<float> got;
  ASSERT_TRUE(c.write([&](const void* d, size_t n) {
                 const float* f = static_cast<const float*>(d);
                 got.insert(got.end(), f, f + n / 4);
                 return Status::ok();
               }).is_ok());
  EXPECT_EQ(got, (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TEST(Decompositions, SdpaGroupsQueryHeadsForGqa) {
  Graph g;
  auto q = g.add_input("q", TensorType{ScalarType::kFloat, {4, 2, 8}, {}});
  auto k = g.add_input("k", TensorType{ScalarType::kFloat, {2, 5, 8}, {}});
  auto v = g.add_input("v", TensorType{ScalarType::kFloat, {2, 5, 8}, {}});
  auto o = g.add(OpId::ScaledDotProductAttention, {q, k, v, graph::None{}, 0.0, false, graph::None{}, true}, "attn");
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  g.set_outputs({*o});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok()) << counts.status().message();
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "f32[4, 2, 8]");
  std::string text = g.to_string();
  EXPECT_NE(text.find("f32[2, 4, 8] = view_copy.out(self=%q"), std::string::npos) << text;  // 2 groups of 2 heads
  EXPECT_NE(text.find("_softmax.out"), std::string::npos);
}

TEST(MemoryPlan, LiveValuesNeverOverlap) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {16}, {}});
  auto a = *g.add(OpId::NegOut, {x}, "a");
  auto b = *g.add(OpId::NegOut, {a}, "b");
  auto c = *g.add(OpId::AddOut, {a, b}, "c");  // a and b live together
  auto d = *g.add(OpId::NegOut, {c}, "d");     // may reuse a's or b's memory
  g.set_outputs({d});
  auto plan = plan_memory(g, ExportConfig{});
  ASSERT_TRUE(plan.is_ok());
  auto off = [&](graph::ValueId v) { return plan->offsets.at(v); };
  EXPECT_NE(off(a), off(b));
  EXPECT_NE(off(c), off(a));
  EXPECT_NE(off(c), off(b));
  EXPECT_LT(plan->arena_size, plan->sum_of_sizes);  // reuse happened
  for (auto [v, o] : plan->offsets) EXPECT_EQ(o % MemoryPlan::kAlignment, 0u);
}

TEST(Emit, KernelCallArgsFollowTheUpstreamConvention) {
  graph::Program p;
  p.methods.emplace_back("forward");
  auto& g = p.methods[0];
  auto a = g.add_input("a", TensorType{ScalarType::kFloat, {3}, {}});
  auto b = g.add_input("b", TensorType{ScalarType::kFloat, {3}, {}});
  auto c = *g.add(OpId::AddOut, {a, b}, "c");
  g.set_outputs({c});
  p.constant_methods["get_answer"] = int64_t{42};
  auto plan = plan_memory(g, ExportConfig{});
  ASSERT_TRUE(plan.is_ok());
  auto contents = emit_program(p, {*plan});
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  const auto& ep = *contents->program.execution_plan[0];
  ASSERT_EQ(ep.chains[0]->instructions.size(), 1u);
  const auto* call = ep.chains[0]->instructions[0]->instr_args.AsKernelCall();
  ASSERT_NE(call, nullptr);
  // aten::add.out(self, other, *, alpha=1, out) + return slot = out, like add.pte's [0, 1, 3, 2, 2].
  ASSERT_EQ(call->args.size(), 5u);
  EXPECT_EQ(call->args[3], call->args[4]);
  EXPECT_NE(ep.values[size_t(call->args[2])]->val.AsInt(), nullptr);
  EXPECT_EQ(ep.operators[0]->name, "aten::add");
  EXPECT_EQ(ep.operators[0]->overload, "out");
  EXPECT_EQ(ep.non_const_buffer_sizes[0], 0);
  EXPECT_EQ(contents->program.execution_plan[1]->name, "get_answer");
}

}  // namespace
}  // namespace hf2pte::exp
