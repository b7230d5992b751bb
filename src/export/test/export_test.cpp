#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "export/decompositions.h"
#include "export/exporter.h"
#include <filesystem>
#include "export/interpreter.h"
#include "kernels/portable/kernels.h"
#include "models/model_builder.h"
#include "graph/constant.h"
#include "export/emit.h"
#include "export/memory_plan.h"
#include "export/pipeline.h"
#include "export/stages.h"
#include "export/test/plan_check.h"
#include "pte/pte_file.h"
#include "pte/pte_writer.h"
#include "runtime/program.h"

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

TEST(Exporter, InterruptLeavesNoFileBehind) {
  namespace fs = std::filesystem;
  auto dir = fs::path(HF2PTE_BINARY_DIR) / "test_tmp" / "interrupt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::atomic<bool> cancel{true};  // as if SIGINT arrived before the first byte
  ExportRequest req;
  req.model_dir = std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/llama-mha";
  req.output_path = (dir / "m.pte").string();
  req.cancel = &cancel;
  auto r = export_model(req);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCancelled) << r.status().message();
  EXPECT_TRUE(fs::is_empty(dir)) << "files left behind";
}

// --max-seq-len / --dim (issue #14): the sizes reported before the weights
// stream are those of the program written: the file's size within 1% (the
// layout is decided before streaming, so it is exact) and the planned arena
// (the non_const_buffer_sizes of the file) exactly; and the report comes
// before the first byte is written.
TEST(Exporter, EstimateBeforeStreamingMatchesTheWrittenProgram) {
  namespace fs = std::filesystem;
  struct Case {
    const char* fixture;
    std::optional<int64_t> max_seq_len;
    std::optional<int64_t> dim_max;
    Backend backend;
    bool kv_cache;
  };
  const Case cases[] = {
      {"llama-gqa", 1024, std::nullopt, Backend::kPortable, true},
      {"llama-gqa", 4096, std::nullopt, Backend::kXnnpack, true},
      {"llama-gqa", std::nullopt, 32, Backend::kXnnpack, true},
      {"gemma2", 300, 100, Backend::kPortable, true},
      {"qwen3", 2000, std::nullopt, Backend::kXnnpack, false},
  };
  for (const auto& c : cases) {
    const std::string label = fmt::format("{} max_seq_len {} dim {} {}", c.fixture, c.max_seq_len.value_or(0),
                                          c.dim_max.value_or(0), backend_name(c.backend));
    auto dir = fs::path(HF2PTE_BINARY_DIR) / "test_tmp" / "estimate";
    fs::create_directories(dir);
    ExportRequest req;
    req.model_dir = std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/" + c.fixture;
    req.output_path = (dir / "m.pte").string();
    req.config.backend = c.backend;
    req.config.max_seq_len = c.max_seq_len;
    req.config.use_kv_cache = c.kv_cache;
    if (c.dim_max) req.config.dims["seq"] = DimBound{1, *c.dim_max};
    std::optional<ExportEstimate> estimate;
    uint64_t written_at_estimate = 0, written = 0;
    req.on_progress = [&](const ExportProgress& p) {
      if (p.stage == "write") written = p.bytes_written;
    };
    req.on_estimate = [&](const ExportEstimate& e) {
      EXPECT_FALSE(estimate) << "reported twice: " << label;
      estimate = e;
      written_at_estimate = written;
    };
    auto r = export_model(req);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    ASSERT_TRUE(estimate) << label;
    EXPECT_EQ(written_at_estimate, 0u) << label;
    const uint64_t file_size = fs::file_size(req.output_path);
    EXPECT_LE(std::fabs(double(estimate->file_bytes) - double(file_size)), 0.01 * double(file_size)) << label;
    EXPECT_EQ(estimate->max_seq_len, c.max_seq_len.value_or(r->max_seq_len)) << label;

    auto program = rt::Program::load(req.output_path);
    ASSERT_TRUE(program.is_ok()) << program.status().message();
    uint64_t planned = 0;
    for (const auto* plan : *(*program)->file().program().execution_plan()) {
      const auto* sizes = plan->non_const_buffer_sizes();
      for (uint32_t i = 1; sizes != nullptr && i < sizes->size(); ++i) planned += uint64_t(sizes->Get(i));
    }
    EXPECT_GT(planned, 0u) << label;
    EXPECT_EQ(estimate->arena_bytes, planned) << label;
    EXPECT_EQ(estimate->arena_bytes, r->arena_bytes) << label;
  }
}

// ---- rule tests: the graph before and after a rule, through the reference interpreter ----

HostTensor random_tensor(ScalarType dtype, std::vector<int64_t> sizes, uint32_t seed) {
  HostTensor t{dtype, std::move(sizes), {}};
  t.bytes.resize(size_t(t.numel()) * element_size(dtype));
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    double u = double(seed >> 8) / double(1u << 24);
    if (dtype == ScalarType::kFloat) t.data<float>()[i] = float(2 * u - 1);
    if (dtype == ScalarType::kBool) t.bytes[size_t(i)] = u < 0.7 || i % 7 == 0;  // at least some true per row
  }
  return t;
}

/// Runs `g` before and after the decompositions on `inputs`; checks that `rule`
/// fired and that results agree within 1e-5.
void expect_rule_preserves_results(Graph g, const char* rule, const std::vector<HostTensor>& inputs) {
  Graph before = g;
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok()) << counts.status().message();
  EXPECT_GT((*counts)[rule], 0) << rule << " did not fire";
  for (const auto& n : g.nodes()) EXPECT_TRUE(op_info(n.op).has_kernel) << op_info(n.op).kernel_key();
  GraphInterpreter ref(before, portable_registry()), low(g, portable_registry());
  auto a = ref.run(inputs);
  auto b = low.run(inputs);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  ASSERT_EQ(a->size(), b->size());
  for (size_t o = 0; o < a->size(); ++o) {
    ASSERT_EQ((*a)[o].sizes, (*b)[o].sizes);
    for (int64_t i = 0; i < (*a)[o].numel(); ++i) {
      ASSERT_NEAR((*a)[o].data<float>()[i], (*b)[o].data<float>()[i], 1e-5) << rule << " element " << i;
    }
  }
}

TEST(RuleTest, LinearWithBiasOn3dInput) {
  Graph g;
  SymInt s = g.add_dim("seq", 1, 8);
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {2, s, 5}, {}});
  auto w = g.add_input("w", TensorType{ScalarType::kFloat, {3, 5}, {}});
  auto b = g.add_input("b", TensorType{ScalarType::kFloat, {3}, {}});
  g.set_outputs({*g.add(OpId::Linear, {x, w, b}, "proj")});
  expect_rule_preserves_results(g, "linear_to_mm", {random_tensor(ScalarType::kFloat, {2, 4, 5}, 1),
                                                    random_tensor(ScalarType::kFloat, {3, 5}, 2),
                                                    random_tensor(ScalarType::kFloat, {3}, 3)});
}

TEST(RuleTest, RmsNormWithWeight) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {3, 16}, {}});
  auto w = g.add_input("w", TensorType{ScalarType::kFloat, {16}, {}});
  g.set_outputs({*g.add(OpId::RmsNorm, {x, IntList{16}, w, 1e-5}, "norm")});
  expect_rule_preserves_results(g, "rms_norm_to_primitives",
                                {random_tensor(ScalarType::kFloat, {3, 16}, 4), random_tensor(ScalarType::kFloat, {16}, 5)});
}

TEST(RuleTest, Silu) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {7}, {}});
  g.set_outputs({*g.add(OpId::Silu, {x}, "act")});
  expect_rule_preserves_results(g, "silu_to_sigmoid_mul", {random_tensor(ScalarType::kFloat, {7}, 6)});
}

TEST(RuleTest, SdpaGqaWithBoolMaskAndDqNotDv) {
  Graph g;
  auto q = g.add_input("q", TensorType{ScalarType::kFloat, {6, 3, 4}, {}});
  auto k = g.add_input("k", TensorType{ScalarType::kFloat, {2, 5, 4}, {}});
  auto v = g.add_input("v", TensorType{ScalarType::kFloat, {2, 5, 7}, {}});
  auto m = g.add_input("m", TensorType{ScalarType::kBool, {3, 5}, {}});
  g.set_outputs({*g.add(OpId::ScaledDotProductAttention, {q, k, v, m, 0.0, false, 0.3, true}, "attn")});
  expect_rule_preserves_results(g, "sdpa_to_math", {random_tensor(ScalarType::kFloat, {6, 3, 4}, 7),
                                                    random_tensor(ScalarType::kFloat, {2, 5, 4}, 8),
                                                    random_tensor(ScalarType::kFloat, {2, 5, 7}, 9),
                                                    random_tensor(ScalarType::kBool, {3, 5}, 10)});
}

TEST(RuleTest, SdpaWithFloatMaskAndDefaultScale) {
  Graph g;
  auto q = g.add_input("q", TensorType{ScalarType::kFloat, {1, 2, 3, 4}, {}});
  auto k = g.add_input("k", TensorType{ScalarType::kFloat, {1, 2, 5, 4}, {}});
  auto v = g.add_input("v", TensorType{ScalarType::kFloat, {1, 2, 5, 4}, {}});
  auto m = g.add_input("m", TensorType{ScalarType::kFloat, {3, 5}, {}});
  g.set_outputs({*g.add(OpId::ScaledDotProductAttention, {q, k, v, m}, "attn")});
  expect_rule_preserves_results(g, "sdpa_to_math", {random_tensor(ScalarType::kFloat, {1, 2, 3, 4}, 11),
                                                    random_tensor(ScalarType::kFloat, {1, 2, 5, 4}, 12),
                                                    random_tensor(ScalarType::kFloat, {1, 2, 5, 4}, 13),
                                                    random_tensor(ScalarType::kFloat, {3, 5}, 14)});
}

// The ops gpt-oss and Mamba added (exp, log1p, clamp) are kernel ops: no rule
// touches them, and the reference interpreter runs them as ATen defines them.
TEST(RuleTest, ScanAndClampOpsAreKernelOps) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {4}, {}});
  auto e = *g.add(OpId::ExpOut, {x}, "exp");
  auto l = *g.add(OpId::Log1pOut, {e}, "softplus");
  auto c = *g.add(OpId::ClampOut, {l, graph::None{}, 1.0}, "clamped");
  g.set_outputs({c});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok());
  EXPECT_TRUE(counts->empty());
  EXPECT_EQ(g.nodes().size(), 3u);
  HostTensor in{ScalarType::kFloat, {4}, {}};
  in.bytes.resize(16);
  const float xs[4] = {-20, 0, 0.5f, 3};
  std::memcpy(in.bytes.data(), xs, 16);
  GraphInterpreter ref(g, portable_registry());
  auto out = ref.run({in});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  for (int i = 0; i < 4; ++i) {
    const double softplus = std::log1p(std::exp(double(xs[i])));
    EXPECT_NEAR((*out)[0].data<float>()[i], std::min(softplus, 1.0), 1e-6) << i;
  }
}

TEST(RuleTest, RulesLeaveKernelOpsAlone) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {4}, {}});
  g.set_outputs({*g.add(OpId::NegOut, {x}, "neg")});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok());
  EXPECT_TRUE(counts->empty());
  EXPECT_EQ(g.nodes().size(), 1u);
}


TEST(MemoryPlan, FixtureProgramsNeverOverlapLiveTensors) {
  for (const char* name : {"llama-mha", "llama-gqa", "phi3"}) {
    auto ckpt = Checkpoint::open(std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/" + name);
    ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().message();
    auto built = models::build_model(*ckpt, models::BuildOptions{});
    ASSERT_TRUE(built.is_ok()) << built.status().message();
    StageLog log;
    auto contents = run_pipeline(built->program, ExportConfig{}, log);
    ASSERT_TRUE(contents.is_ok()) << contents.status().message();
    expect_no_live_overlap(*contents->program.execution_plan[0]);
  }
}

TEST(MemoryPlan, RandomGraphsNeverOverlapLiveTensors) {
  uint32_t seed = 12345;
  auto rnd = [&](uint32_t n) { seed = seed * 1664525u + 1013904223u; return (seed >> 8) % n; };
  for (int trial = 0; trial < 20; ++trial) {
    graph::Program p;
    p.methods.emplace_back("forward");
    auto& g = p.methods[0];
    SymInt s = g.add_dim("seq", 1, 1 + int64_t(rnd(16)));
    std::vector<graph::ValueId> pool{g.add_input("x", TensorType{ScalarType::kFloat, {s, 8}, {}})};
    for (int i = 0; i < 30; ++i) {
      auto a = pool[rnd(uint32_t(pool.size()))], b = pool[rnd(uint32_t(pool.size()))];
      auto r = rnd(3) == 0 ? g.add(OpId::NegOut, {a}, "n" + std::to_string(i)) : g.add(OpId::AddOut, {a, b}, "a" + std::to_string(i));
      ASSERT_TRUE(r.is_ok());
      pool.push_back(*r);
    }
    g.set_outputs({pool.back(), pool[pool.size() / 2]});
    StageLog log;
    auto contents = run_pipeline(p, ExportConfig{}, log);
    ASSERT_TRUE(contents.is_ok()) << contents.status().message();
    expect_no_live_overlap(*contents->program.execution_plan[0]);
  }
}

// Item 19: a compound size whose interval bound is not finite plans at
// max(hint * 4, 1024); a finite bound is never touched.
TEST(SymIntPlanningBound, ClampsOnlyNonFiniteBounds) {
  using graph::DimRange;
  using graph::DimRanges;
  const SymInt a = SymInt::dim("a"), b = SymInt::dim("b");
  const int64_t huge = int64_t{1} << 40;
  // Finite: exact, even when below the 1024 floor.
  DimRanges small{{"a", DimRange{1, 8}}, {"b", DimRange{1, 16}}};
  EXPECT_EQ((a * b).upper_bound(small), 128);
  EXPECT_EQ((a * b).planning_bound(small), 128);
  EXPECT_EQ((a * b + 4000).planning_bound(small), 4128);  // finite and above 1024: exact too
  // Saturated product of two finite-but-huge dims: hints 5 (default) -> 25*4 < 1024.
  DimRanges big{{"a", DimRange{1, huge}}, {"b", DimRange{1, huge}}};
  EXPECT_EQ((a * b).upper_bound(big), DimRange::kUnbounded);
  EXPECT_EQ((a * b).planning_bound(big), 1024);
  // Hints decide when they are large: (100 * 50) * 4 = 20000.
  DimRanges hinted{{"a", DimRange{1, DimRange::kUnbounded, 100}}, {"b", DimRange{1, huge, 50}}};
  EXPECT_EQ((a * b).planning_bound(hinted), 20000);
  EXPECT_EQ((a + b * 2).planning_bound(hinted), 1024);  // (100 + 100) * 4 = 800 -> floor
  // A single dim with an unbounded range: the same rule.
  EXPECT_EQ(a.planning_bound(hinted), 1024);
  // No range at all (no hint): the floor.
  EXPECT_EQ((SymInt::dim("z") * 3).planning_bound(small), 1024);
  // The default hint is the value validation samples, clamp(5, min, max).
  EXPECT_EQ((DimRange{1, 3}).hint_or_default(), 3);
  EXPECT_EQ((DimRange{7, 100}).hint_or_default(), 7);
  EXPECT_EQ((DimRange{1, DimRange::kUnbounded}).hint_or_default(), 5);
}

// The planner used to stop at "no upper bound"; with the clamp a graph whose
// sizes saturate plans without overflowing, at the clamped size.
TEST(MemoryPlan, SaturatedSizesPlanAtTheClampWithoutOverflow) {
  Graph g;
  const int64_t huge = int64_t{1} << 40;
  SymInt a = g.add_dim("a", 1, huge), b = g.add_dim("b", 1, huge);
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {a * b, 4}, {}});
  auto y = *g.add(OpId::NegOut, {x}, "y");
  auto z = *g.add(OpId::NegOut, {y}, "z");
  g.set_outputs({z});
  auto plan = plan_memory(g, ExportConfig{});
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  const uint64_t each = 1024 * 4 * 4;  // [1024, 4] f32
  EXPECT_EQ(plan->sum_of_sizes, 3 * each);
  EXPECT_GE(plan->arena_size, 2 * each);  // y and z (or x and y) live together
  EXPECT_LE(plan->arena_size, 3 * each);
  // A finite bound above the floor is planned exactly: no clamp can shrink it.
  Graph h;
  SymInt c = h.add_dim("c", 1, 3000);
  auto u = h.add_input("u", TensorType{ScalarType::kFloat, {c * 2}, {}});
  h.set_outputs({*h.add(OpId::NegOut, {u}, "v")});
  auto plan2 = plan_memory(h, ExportConfig{});
  ASSERT_TRUE(plan2.is_ok());
  EXPECT_EQ(plan2->sum_of_sizes, 2 * 6000 * 4u);
}

// Items 37/39: a view whose target size is symbolic computes it at runtime
// with aten::sym_size.int + executorch_prim::mul.Scalar; seq ** 3 is a chain
// of two muls. The program then runs at two lengths through our runtime.
TEST(Emit, SymbolicViewComputesItsSizeWithPrimOps) {
  graph::Program p;
  p.methods.emplace_back("forward");
  auto& g = p.methods[0];
  SymInt s = g.add_dim("seq", 1, 8);
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {s, s, s}, {}});
  const SymInt cube = sym_pow(s, 3);
  EXPECT_EQ(cube.str(), "((seq * seq) * seq)");
  EXPECT_EQ(sym_pow(s, 1).str(), "seq");
  EXPECT_EQ(sym_pow(s, 0).str(), "1");
  EXPECT_EQ(sym_pow(SymInt(3), 4).str(), "81");
  auto v = g.add(OpId::ViewCopyOut, {x, IntList{cube}}, "layers.0.flat");
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  g.set_outputs({*v});
  ExportConfig config;
  config.backend = Backend::kPortable;
  StageLog log;
  auto contents = run_pipeline(p, config, log);
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  const auto& ep = *contents->program.execution_plan[0];
  std::vector<std::string> ops;
  for (const auto& in : ep.chains[0]->instructions) {
    if (const auto* k = in->instr_args.AsKernelCall()) {
      const auto& op = ep.operators[size_t(k->op_index)];
      ops.push_back(op->name + "." + op->overload);
    }
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"aten::sym_size.int", "executorch_prim::mul.Scalar",
                                           "executorch_prim::mul.Scalar", "aten::view_copy.out"}));
  auto dir = std::filesystem::temp_directory_path() / "hf2pte_export_test_symview";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.pte").string();
  ASSERT_TRUE(pte::write_pte(path, std::move(*contents)).is_ok());
  auto program = rt::Program::load(path);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto method = (*program)->load_method("forward", portable_registry());
  ASSERT_TRUE(method.is_ok()) << method.status().message();
  for (int64_t n : {2, 5}) {
    std::vector<float> data(static_cast<size_t>(n * n * n));
    for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.5f - 3.0f;
    ASSERT_TRUE((*method)->set_input(0, HostTensor::from(ScalarType::kFloat, {n, n, n}, data)).is_ok());
    auto st = (*method)->execute();
    ASSERT_TRUE(st.is_ok()) << st.message();
    auto out = (*method)->output_tensor(0);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(out->sizes, (std::vector<int64_t>{n * n * n}));
    ASSERT_EQ(out->numel(), n * n * n);
    EXPECT_EQ(0, std::memcmp(out->bytes.data(), data.data(), data.size() * 4)) << n;
  }
  std::filesystem::remove_all(dir);
}

// Item 41: a verifier violation names the op, the node, the model layer it came
// from and the backend. Each graph is built valid, then broken by hand.
struct BadGraph {
  graph::Program p;
  Graph& g() { return p.methods[0]; }
  BadGraph() { p.methods.emplace_back("forward"); }
  std::string verify(Backend backend) {
    ExportConfig c;
    c.backend = backend;
    StageLog log;
    Status st = verify_program(p, c, log);
    return st.is_ok() ? std::string("<ok>") : st.message();
  }
};

void expect_parts(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
}

TEST(Verify, OpOutsideTheKernelSetNamesOpNodeLayerAndBackend) {
  BadGraph b;
  auto x = b.g().add_input("x", TensorType{ScalarType::kFloat, {2, 3}, {}});
  auto y = b.g().add(OpId::Silu, {x}, "layers.3.mlp.act_fn");  // graph-only: a decomposition should have removed it
  ASSERT_TRUE(y.is_ok());
  b.g().set_outputs({*y});
  expect_parts(b.verify(Backend::kXnnpack), {"not in the kernel op set", "node layers.3.mlp.act_fn", "op aten::silu",
                                             "layer layers.3,", "backend xnnpack"});
}

TEST(Verify, WrongDtypeNamesOpNodeLayerAndBackend) {
  BadGraph b;
  auto x = b.g().add_input("x", TensorType{ScalarType::kFloat, {2, 3}, {}});
  auto y = *b.g().add(OpId::NegOut, {x}, "model.layers.12.self_attn.neg");
  b.g().set_outputs({y});
  EXPECT_EQ(b.verify(Backend::kPortable), "<ok>");  // negative control: the valid graph passes
  b.g().mutable_value(y).type.dtype = ScalarType::kLong;
  expect_parts(b.verify(Backend::kPortable), {"is i64[2, 3] but the op computes f32[2, 3]", "node model.layers.12.self_attn.neg",
                                              "op aten::neg.out", "layer model.layers.12,", "backend portable"});
}

TEST(Verify, ShapeMismatchOutsideTheLayersSaysSo) {
  BadGraph b;
  auto x = b.g().add_input("x", TensorType{ScalarType::kFloat, {2, 3}, {}});
  auto w = b.g().add_input("w", TensorType{ScalarType::kFloat, {2, 3}, {}});
  auto y = *b.g().add(OpId::AddOut, {x, w}, "lm_head.add");
  b.g().set_outputs({y});
  b.g().mutable_value(y).type.sizes = {2, 4};
  expect_parts(b.verify(Backend::kXnnpack), {"is f32[2, 4] but the op computes f32[2, 3]", "node lm_head.add", "op aten::add.out",
                                             "layer none (outside the layer stack)", "backend xnnpack"});
  // "xlayers.3" or "layers.3x" is no layer.
  BadGraph c;
  auto u = c.g().add_input("u", TensorType{ScalarType::kFloat, {2}, {}});
  auto v = *c.g().add(OpId::NegOut, {u}, "sublayers.3x.neg");
  c.g().set_outputs({v});
  c.g().mutable_value(v).type.dtype = ScalarType::kLong;
  expect_parts(c.verify(Backend::kXnnpack), {"layer none"});
}

// Unbacked (data-dependent) sizes: bounded by their declared upper bound,
// bound at runtime by name, planned at the bound; without a bound the verifier
// says so and names the node.
TEST(SymIntUnbacked, BoundsEvaluationAndPlanning) {
  const SymInt u = SymInt::unbacked("u0", 100), free = SymInt::unbacked("u1", std::nullopt);
  const graph::DimRanges ranges{{"seq", graph::DimRange{1, 8}}};
  const SymInt s = SymInt::dim("seq");
  EXPECT_EQ(u.kind(), SymInt::Kind::kUnbacked);
  EXPECT_EQ((u * 4).str(), "(u0 * 4)");
  EXPECT_EQ((u * 4).upper_bound(ranges), 400);
  EXPECT_EQ((u * s).upper_bound(ranges), 800);
  EXPECT_EQ((u * s).lower_bound(ranges), 0);
  EXPECT_EQ((u * s).planning_bound(ranges), 800);
  EXPECT_EQ((u * s).evaluate({{"u0", 7}, {"seq", 3}}), 21);
  EXPECT_EQ((u * s).evaluate({{"seq", 3}}), std::nullopt);  // not known until the op ran
  EXPECT_EQ((u * s).unbounded_unbacked(), std::nullopt);
  EXPECT_EQ((free + s).unbounded_unbacked(), "u1");
  // No declared bound: no clamp either (there is no hint to clamp to).
  EXPECT_EQ((free + s).planning_bound(ranges), graph::DimRange::kUnbounded);
}

TEST(SymIntUnbacked, PlannedAtTheBoundAndRejectedWithoutOne) {
  for (bool bounded : {true, false}) {
    BadGraph b;
    const SymInt u = SymInt::unbacked("u0", bounded ? std::optional<int64_t>(100) : std::nullopt);
    auto x = b.g().add_input("x", TensorType{ScalarType::kFloat, {u}, {}});
    auto y = b.g().add(OpId::ViewCopyOut, {x, IntList{u, 1}}, "layers.1.moe.routed");
    ASSERT_TRUE(y.is_ok()) << y.status().message();
    EXPECT_EQ(b.g().type(*y).str(), "f32[u0, 1]");
    b.g().set_outputs({*y});
    if (bounded) {
      EXPECT_EQ(b.verify(Backend::kPortable), "<ok>");
      auto plan = plan_memory(b.g(), ExportConfig{});
      ASSERT_TRUE(plan.is_ok()) << plan.status().message();
      EXPECT_EQ(plan->sum_of_sizes, 2 * 400u);  // x and y, each 100 floats
    } else {
      expect_parts(b.verify(Backend::kPortable), {"data-dependent size u0", "no declared upper bound", "node layers.1.moe.routed",
                                                  "op aten::view_copy.out", "layer layers.1,", "backend portable"});
      auto plan = plan_memory(b.g(), ExportConfig{});
      EXPECT_FALSE(plan.is_ok());  // the planner's own backstop
    }
  }
}

// The cap never exceeds the builder's buffers (DimRange::limit), and the
// hint (here 300) takes part in the formula: max(2*4, 300*4, 1024) = 1200.
TEST(ProgramFixes, CapRespectsTheBuildersLimitAndTheHint) {
  struct Case {
    graph::DimRange range;
    int64_t want_max;
    std::string want_text;
  } cases[] = {
      {{1, graph::DimRange::kUnbounded, 0, 256}, 256, "seq -> [1, 1024] (limited to 256 by the model's buffers)"},
      {{1, graph::DimRange::kUnbounded, 300}, 1200, "seq -> [1, 1200];"},
      {{1, graph::DimRange::kUnbounded, 0, 4096}, 1024, "seq -> [1, 1024];"},
  };
  for (const auto& c : cases) {
    graph::Program p;
    p.methods.emplace_back("forward");
    auto& g = p.methods[0];
    SymInt s = g.add_dim("seq", 1, 1);
    g.dims().at("seq") = c.range;
    g.set_outputs({g.add_input("x", TensorType{ScalarType::kFloat, {s}, {}})});
    StageLog log;
    ASSERT_TRUE(run_program_fixes(p, ExportConfig{}, log).is_ok());
    EXPECT_EQ(g.dims().at("seq").max, c.want_max);
    ASSERT_EQ(log.warnings.size(), 1u);
    EXPECT_NE(log.warnings[0].find(c.want_text), std::string::npos) << log.warnings[0];
  }
  graph::Program p;
  p.methods.emplace_back("forward");
  p.methods[0].add_dim("seq", 300, graph::DimRange::kUnbounded);
  p.methods[0].dims().at("seq").limit = 256;
  StageLog log;
  auto st = run_program_fixes(p, ExportConfig{}, log);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--dim seq=300: minimum exceeds the model's bound 256"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hf2pte::exp
