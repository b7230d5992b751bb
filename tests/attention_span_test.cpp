// --attention-span written (issue #4): every decoder layer attends over the
// written cache positions [0, max(cache_position] + 1) only. Correctness is
// measured against the independent fixture references (logits within 1e-4,
// greedy ids exact) on both backends, at the default cache size and with a
// cache that the decode fills up to its last position; the structure tests
// check that the work really shrinks (one data-dependent end per method, a
// slice to it per layer, attention inputs of that width at run time).
#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "checkpoint/checkpoint.h"
#include "export/exporter.h"
#include "export/interpreter.h"
#include "export/rewrite.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "models/model_builder.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "decode_check.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kLogitsAtol = 1e-4;  // fixtures README: tolerance_suggestion.logits_atol

std::string export_written(const std::string& dir, const std::string& tag, exp::Backend backend,
                           std::optional<int64_t> max_seq_len = std::nullopt,
                           exp::AttentionSpan span = exp::AttentionSpan::kWritten) {
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = test::temp_dir("span-" + tag) + "/model.pte";
  req.config.backend = backend;
  req.config.max_seq_len = max_seq_len;
  req.config.attention_span = span;
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

using Case = std::tuple<std::string, exp::Backend, exp::AttentionSpan>;

// Both spans, each asked for by name: written is the default for decoders
// with a KV cache, full stays available behind the flag.
class AttentionSpanFixture : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok()); }
  std::string name() const { return std::get<0>(GetParam()); }
  exp::Backend backend() const { return std::get<1>(GetParam()); }
  exp::AttentionSpan span() const { return std::get<2>(GetParam()); }
  std::string dir() const { return test::repo_path("tests/data/fixtures/" + name()); }
  std::string tag() const {
    return name() + "-" + exp::backend_name(backend()) + "-" + exp::attention_span_name(span());
  }
};

// Prefill at position 0 with all T tokens (end = T), then greedy decode (end = T + k).
TEST_P(AttentionSpanFixture, PrefillAndDecodeMatchReference) {
  const std::string pte = export_written(dir(), tag(), backend(), std::nullopt, span());
  double full = test::expect_full_sequence_logits(dir(), pte, kernels::portable_registry(), kLogitsAtol);
  double decode = test::expect_decode_reproduces_greedy(dir(), pte, kernels::portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_logit_diff", test::diff_text(full));
  RecordProperty("max_abs_step_logit_diff", test::diff_text(decode));
}

// A cache exactly as long as the fixture's prompt plus its greedy steps: the
// last decode call writes position max_seq_len - 1 and attends over all of it.
TEST_P(AttentionSpanFixture, DecodeUpToTheLastCachePositionMatchesReference) {
  const int64_t T = int64_t(test::as_longs(test::load_npy(dir() + "/input_ids.npy")).size());
  const int64_t G = int64_t(test::as_longs(test::load_npy(dir() + "/greedy.npy")).size());
  const std::string pte = export_written(dir(), tag() + "-tight", backend(), T + G - 1, span());
  double decode = test::expect_decode_reproduces_greedy(dir(), pte, kernels::portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(decode));
}

// The same program through the optimized kernels (what `hf2pte run/bench` use).
TEST_P(AttentionSpanFixture, OptimizedKernelsDecodeReproducesGreedy) {
  const std::string pte = export_written(dir(), tag() + "-opt", backend(), std::nullopt, span());
  double decode = test::expect_decode_reproduces_greedy(dir(), pte, kernels::optimized_registry(), kLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(decode));
}

auto span_case_name = [](const auto& info) {
  std::string n = std::get<0>(info.param) + "_" + exp::backend_name(std::get<1>(info.param)) + "_" +
                  exp::attention_span_name(std::get<2>(info.param));
  for (auto& c : n) if (c == '-') c = '_';
  return n;
};

// The default span on every decoder family.
INSTANTIATE_TEST_SUITE_P(Fixtures, AttentionSpanFixture,
                         ::testing::Combine(::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "mistral",
                                                              "qwen2", "phi3", "llama3-rope", "qwen3", "gemma", "olmo2",
                                                              "gemma2", "gemma3", "phi", "gpt_neox", "mixtral",
                                                              "qwen3_moe", "gpt2", "gpt2-hubstyle"),
                                            ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack),
                                            ::testing::Values(exp::AttentionSpan::kWritten)),
                         span_case_name);
// The full span behind the flag: one family per attention shape (MHA, GQA
// with tied embeddings, sliding windows, partial rotary, experts, learned
// positions); its masking over the static cache is the same code for all.
INSTANTIATE_TEST_SUITE_P(FullSpan, AttentionSpanFixture,
                         ::testing::Combine(::testing::Values("llama-mha", "llama-gqa-tied-bf16", "gemma2", "phi",
                                                              "mixtral", "gpt2"),
                                            ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack),
                                            ::testing::Values(exp::AttentionSpan::kFull)),
                         span_case_name);

/// Instructions per operator name in the written program's forward.
std::map<std::string, uint64_t> op_calls(const std::string& pte) {
  auto file = pte::PteFile::open(pte);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  std::map<std::string, uint64_t> calls;
  if (!file.is_ok()) return calls;
  const auto j = pte::inspect_json(**file);
  for (const auto& m : j["methods"]) {
    if (m["name"] != "forward") continue;
    for (const auto& op : m["operators"]) calls[op["name"].get<std::string>()] += op["instructions"].get<uint64_t>();
  }
  return calls;
}

// One end per call (one nonzero), and per layer a K and a V slice to it, plus
// one slice of the mask: compared with the same export at the full span.
TEST(AttentionSpan, EmittedProgramComputesTheEndOncePerMethod) {
  const std::string dir = test::repo_path("tests/data/fixtures/llama-gqa");  // 2 layers
  auto full = op_calls(export_written(dir, "ops-full", exp::Backend::kPortable, std::nullopt, exp::AttentionSpan::kFull));
  auto written = op_calls(export_written(dir, "ops-written", exp::Backend::kPortable));
  EXPECT_EQ(full["aten::nonzero.out"], 0u);
  EXPECT_EQ(written["aten::nonzero.out"], 1u);
  EXPECT_EQ(written["aten::amax.out"], full["aten::amax.out"] + 1);
  EXPECT_EQ(written["aten::slice_copy.Tensor_out"], full["aten::slice_copy.Tensor_out"] + 2 * 2 + 1);

  // XNNPACK claims only static slices: the symbolic ones stay portable kernels.
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto xfull = op_calls(export_written(dir, "ops-xfull", exp::Backend::kXnnpack, std::nullopt, exp::AttentionSpan::kFull));
  auto xwritten = op_calls(export_written(dir, "ops-xwritten", exp::Backend::kXnnpack));
  EXPECT_EQ(xwritten["aten::nonzero.out"], 1u);
  EXPECT_EQ(xwritten["aten::slice_copy.Tensor_out"], xfull["aten::slice_copy.Tensor_out"] + 2 * 2 + 1);
}

// The built graph, run by the reference interpreter: the K/V each layer's
// attention reads and the mask are `end` = last position + 1 wide, for a
// prefill at position 0 and for decode steps, and the slices' end is the one
// data-dependent symbol bounded by max_seq_len.
TEST(AttentionSpan, AttentionInputsHaveTheWrittenWidth) {
  auto ckpt = Checkpoint::open(test::repo_path("tests/data/fixtures/llama-gqa"));
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().message();
  models::BuildOptions bo;
  bo.max_seq_len = 64;
  bo.attend_written_only = true;
  auto built = models::build_model(*ckpt, bo);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  graph::Graph& g = built->program.methods[0];

  int nonzeros = 0;
  std::vector<graph::ValueId> watched;  // the mask, then k/v per layer
  std::optional<graph::SymInt> end;
  for (const auto& n : g.nodes()) {
    if (n.op == OpId::NonzeroOut) {
      ++nonzeros;
      end = g.type(n.outputs[0]).sizes[0];
    }
    if (n.name.ends_with(".attn.k_written") || n.name.ends_with(".attn.v_written") || n.name == "mask.written") {
      watched.push_back(n.outputs[0]);
    }
    if (n.op == OpId::ScaledDotProductAttention) {
      ASSERT_TRUE(end.has_value());
      // The slice's size is an expression in the end symbol ("((u + 1) - 1)"
      // today): it must equal the end for every value the end takes.
      for (int64_t e : {1, 37, 64}) {
        const std::map<std::string, int64_t> env{{end->dim_name(), e}};
        EXPECT_EQ(g.type(std::get<graph::ValueId>(n.args[1])).sizes[1].evaluate(env), e) << n.name;  // k
        EXPECT_EQ(g.type(std::get<graph::ValueId>(n.args[3])).sizes[1].evaluate(env), e) << n.name;  // mask
      }
    }
  }
  ASSERT_EQ(nonzeros, 1);
  ASSERT_EQ(end->kind(), graph::SymInt::Kind::kUnbacked);
  EXPECT_EQ(end->upper_bound(g.dims()), 64);
  ASSERT_EQ(watched.size(), 2u * 2 + 1);
  auto outs = g.outputs();
  outs.insert(outs.end(), watched.begin(), watched.end());
  g.set_outputs(outs);

  exp::GraphInterpreter interp(g, kernels::portable_registry());
  auto call = [&](std::vector<int64_t> ids, int64_t start) {
    const int64_t S = int64_t(ids.size());
    std::vector<int64_t> pos(ids.size());
    for (int64_t i = 0; i < S; ++i) pos[size_t(i)] = start + i;
    auto r = interp.run({HostTensor::from(ScalarType::kLong, {1, S}, ids), HostTensor::from(ScalarType::kLong, {S}, pos)});
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    const int64_t width = start + S;
    if (!r.is_ok()) return;
    for (size_t i = 1; i < r->size(); ++i) {
      const auto& sizes = (*r)[i].sizes;
      const bool mask = i == 1;  // mask.written comes before the layers
      const std::vector<int64_t> expected = mask ? std::vector<int64_t>{S, width} : std::vector<int64_t>{2, width, 16};
      EXPECT_EQ(sizes, expected) << "output " << i << " at start " << start;
    }
  };
  call({1, 5, 9, 13, 17}, 0);  // prefill: end = 5
  call({21}, 5);               // decode: end = 6
  call({3}, 6);
  call({4}, 63);               // the last cache position: end = max_seq_len
}

// The end's nonzero has no tensor consumer (only its size is used): dead-code
// elimination must keep it, and still drop really dead nodes.
TEST(AttentionSpan, DeadCodeEliminationKeepsTheNodeThatDefinesTheEnd) {
  graph::Graph g("forward");
  auto x = g.add_input("x", graph::TensorType{ScalarType::kFloat, {8, 4}, {}});
  auto keep = g.add_input("keep", graph::TensorType{ScalarType::kBool, {8}, {}});
  auto nz = g.add(OpId::NonzeroOut, {keep}, "count");
  ASSERT_TRUE(nz.is_ok()) << nz.status().message();
  const graph::SymInt u = g.type(*nz).sizes[0];
  auto rows = g.add(OpId::SliceCopyTensorOut, {x, int64_t{0}, graph::SymInt(0), u}, "rows");
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  ASSERT_TRUE(g.add(OpId::NegOut, {x}, "unused").is_ok());
  g.set_outputs({*rows});
  EXPECT_EQ(exp::eliminate_dead_nodes(g), 1);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0].op, OpId::NonzeroOut);
  EXPECT_EQ(g.nodes()[1].name, "rows");
}

TEST(AttentionSpan, ConfigRoundTripsAndRejectsUnknownSpans) {
  exp::ExportConfig c;
  EXPECT_FALSE(c.attention_span.has_value());  // the exporter decides (DefaultSpanDependsOnTheProgram)
  EXPECT_FALSE(exp::config_to_json(c).contains("attention_span"));
  c.attention_span = exp::AttentionSpan::kWritten;
  auto j = exp::config_to_json(c);
  EXPECT_EQ(j["attention_span"], "written");
  auto back = exp::config_from_json(nlohmann::json::parse(j.dump()), "test");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->attention_span, exp::AttentionSpan::kWritten);
  auto bad = exp::config_from_json(nlohmann::json{{"attention_span", "half"}}, "cfg.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("unknown attention span 'half'; expected full or written"), std::string::npos)
      << bad.status().message();
}

// Unset, the span is written where the attention reads a static KV cache on
// the portable and xnnpack backends, and full for CUDA programs (one
// delegate), --use-custom-sdpa (in-place reads of the written rows),
// --no-kv-cache and models without a decoder KV cache; every program records
// the span it was built with in get_export_config.
TEST(AttentionSpan, DefaultSpanDependsOnTheProgram) {
  struct Case {
    const char* fixture;
    exp::Backend backend;
    bool no_kv_cache, custom_sdpa;
    const char* span;
  };
  const Case cases[] = {{"llama-gqa", exp::Backend::kXnnpack, false, false, "written"},
                        {"llama-gqa", exp::Backend::kPortable, false, false, "written"},
                        {"llama-gqa", exp::Backend::kCuda, false, false, "full"},
                        {"llama-gqa", exp::Backend::kXnnpack, true, false, "full"},
                        {"llama-gqa", exp::Backend::kXnnpack, false, true, "full"},
                        {"mamba", exp::Backend::kXnnpack, false, false, "full"},
                        {"whisper", exp::Backend::kXnnpack, false, false, "full"}};
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  for (const auto& c : cases) {
    exp::ExportRequest req;
    req.model_dir = test::repo_path(std::string("tests/data/fixtures/") + c.fixture);
    req.output_path = test::temp_dir(std::string("span-default-") + c.fixture) + "/model.pte";
    req.config.backend = c.backend;
    req.config.use_kv_cache = !c.no_kv_cache;
    req.config.use_custom_sdpa = c.custom_sdpa;
    auto s = exp::export_model(req);
    ASSERT_TRUE(s.is_ok()) << c.fixture << ": " << s.status().message();
    auto file = pte::PteFile::open(req.output_path);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    const auto j = pte::inspect_json(**file);
    std::string config;
    for (const auto& m : j["methods"]) {
      if (m["name"] == "get_export_config") config = m["constant"]["value"].get<std::string>();
    }
    ASSERT_FALSE(config.empty()) << j.dump();
    EXPECT_EQ(nlohmann::json::parse(config)["attention_span"], c.span) << c.fixture << " " << exp::backend_name(c.backend);
    if (c.custom_sdpa) continue;  // its start position is counted by the same nonzero
    const auto calls = op_calls(req.output_path);
    const auto nz = calls.find("aten::nonzero.out");
    EXPECT_EQ(nz != calls.end() && nz->second > 0, std::string(c.span) == "written")
        << c.fixture << " " << exp::backend_name(c.backend);
  }
}

}  // namespace
}  // namespace hf2pte
