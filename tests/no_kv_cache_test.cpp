// --no-kv-cache (issue #14): a decoder program forward(input_ids[1, S]) ->
// logits[1, S, V] over positions 0..S-1, no cache_position input, no mutable
// buffers, constant method use_kv_cache = false. Correctness is measured against
// the independent fixture references on both backends: full-sequence logits
// within 1e-4, and generation (which recomputes the whole prefix each step)
// reproducing the reference greedy ids with every step's logits within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "checkpoint/npy.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "decode_check.h"
#include "fixture_backend_case.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kLogitsAtol = 1e-4;  // fixtures README: tolerance_suggestion.logits_atol

exp::ExportRequest no_cache_request(const std::string& dir, const std::string& tag, exp::Backend backend) {
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = test::temp_dir("nokv-" + tag) + "/model.pte";
  req.config.backend = backend;
  req.config.use_kv_cache = false;
  return req;
}

std::string export_no_cache(const std::string& dir, const std::string& tag, exp::Backend backend) {
  auto req = no_cache_request(dir, tag, backend);
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

using NoKvCacheFixture = test::FixtureBackendTest;

TEST_P(NoKvCacheFixture, FullSequenceLogitsMatchReference) {
  const std::string pte = export_no_cache(dir(), tag(), backend());
  double diff = test::expect_full_sequence_logits(dir(), pte, kernels::portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_logit_diff", test::diff_text(diff));
}

// generate() on the program: greedy ids exact; and each step's logits (the last
// row of a forward over prompt + the ids so far) within 1e-4 of the reference.
TEST_P(NoKvCacheFixture, GenerateReproducesGreedy) {
  const std::string pte = export_no_cache(dir(), tag() + "-gen", backend());
  auto program = rt::Program::load(pte);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto gen = llm::TextGenerator::create(*program, kernels::optimized_registry());
  ASSERT_TRUE(gen.is_ok()) << gen.status().message();
  EXPECT_FALSE((*gen)->has_kv_cache());

  auto ids = test::as_longs(test::load_npy(dir() + "/input_ids.npy"));
  auto greedy = test::as_longs(test::load_npy(dir() + "/greedy.npy"));
  llm::GenerationConfig cfg;
  cfg.max_new_tokens = int64_t(greedy.size());
  cfg.stop_at_eos = false;
  llm::GenerationStats stats;
  auto produced = (*gen)->generate(ids, cfg, nullptr, &stats);
  ASSERT_TRUE(produced.is_ok()) << produced.status().message();
  EXPECT_EQ(*produced, greedy);
  EXPECT_EQ(stats.stop_reason, "max_new_tokens");

  auto step_ref = test::as_floats(test::load_npy(dir() + "/greedy_step_logits.npy"));
  const int64_t V = (*gen)->vocab_size();
  ASSERT_EQ(step_ref.size(), greedy.size() * size_t(V));
  double worst = 0;
  std::vector<int64_t> seq = ids;
  for (size_t k = 0; k < greedy.size(); ++k) {
    auto logits = (*gen)->forward(seq, 0);
    ASSERT_TRUE(logits.is_ok()) << logits.status().message();
    std::vector<float> last(logits->end() - V, logits->end());
    std::vector<float> ref_row(step_ref.begin() + int64_t(k) * V, step_ref.begin() + int64_t(k + 1) * V);
    worst = std::max(worst, test::max_abs_diff(last, ref_row));
    seq.push_back(greedy[k]);
  }
  EXPECT_LE(worst, kLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(worst));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NoKvCacheFixture,
                         ::testing::Combine(::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "mistral",
                                                              "qwen2", "phi3", "llama3-rope", "qwen3", "gemma", "olmo2",
                                                              "gemma2", "gemma3", "phi", "gpt_neox", "mixtral",
                                                              "qwen3_moe", "gpt2", "gpt2-hubstyle"),
                                            ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack)),
                         test::fixture_backend_name);

// The program's shape of the contract: one input, no mutable buffers or
// mutable data, use_kv_cache = false, the flag in get_export_config, and
// inspect saying so in words.
TEST(NoKvCache, ProgramCarriesUseKvCacheFalse) {
  auto req = no_cache_request(test::repo_path("tests/data/fixtures/llama-gqa"), "meta", exp::Backend::kXnnpack);
  auto summary = exp::export_model(req);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const std::string pte = req.output_path;
  // The export's validation (reference interpreter vs the written program) ran on it.
  const auto& outputs = summary->report["validation"]["forward"]["outputs"];
  ASSERT_EQ(outputs.size(), 1u) << summary->report["validation"].dump();
  EXPECT_TRUE(outputs[0]["shape_matches"].get<bool>());
  EXPECT_LE(outputs[0]["max_abs_diff"].get<double>(), outputs[0]["tolerance"].get<double>());
  auto program = rt::Program::load(pte);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto use = (*program)->load_method("use_kv_cache", kernels::portable_registry());
  ASSERT_TRUE(use.is_ok()) << use.status().message();
  ASSERT_TRUE((*use)->execute().is_ok());
  ASSERT_EQ((*use)->num_outputs(), 1u);
  ASSERT_TRUE((*use)->output(0).is_bool());
  EXPECT_EQ((*use)->output(0).i, 0);
  auto forward = (*program)->load_method("forward", kernels::portable_registry());
  ASSERT_TRUE(forward.is_ok()) << forward.status().message();
  EXPECT_EQ((*forward)->num_inputs(), 1u);
  EXPECT_EQ((*forward)->num_outputs(), 1u);

  auto file = pte::PteFile::open(pte);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const auto j = pte::inspect_json(**file);
  EXPECT_TRUE(j["mutable_data_segments"].empty()) << j["mutable_data_segments"].dump();
  bool saw_config = false;
  for (const auto& m : j["methods"]) {
    if (m["name"] == "forward") {
      EXPECT_TRUE(m["mutable_buffers"].empty()) << m["mutable_buffers"].dump();
    }
    if (m["name"] == "get_export_config") {
      saw_config = true;
      EXPECT_NE(m["constant"]["value"].get<std::string>().find(R"("use_kv_cache":false)"), std::string::npos);
    }
  }
  EXPECT_TRUE(saw_config);
  const std::string text = pte::inspect_text(**file);
  EXPECT_NE(text.find("use_kv_cache = bool false"), std::string::npos) << text;
  EXPECT_NE(text.find("KV cache: none"), std::string::npos) << text;
}

// The default export keeps the cache, and inspect does not claim otherwise.
TEST(NoKvCache, DefaultProgramKeepsTheCache) {
  exp::ExportRequest req;
  req.model_dir = test::repo_path("tests/data/fixtures/llama-gqa");
  req.output_path = test::temp_dir("nokv-default") + "/model.pte";
  req.config.backend = exp::Backend::kPortable;
  ASSERT_TRUE(exp::export_model(req).is_ok());
  auto file = pte::PteFile::open(req.output_path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const std::string text = pte::inspect_text(**file);
  EXPECT_NE(text.find("use_kv_cache = bool true"), std::string::npos) << text;
  EXPECT_EQ(text.find("KV cache: none"), std::string::npos) << text;
}

// A written attention span means nothing without a cache: a named error, not a silent no-op.
TEST(NoKvCache, WrittenAttentionSpanIsAnError) {
  auto req = no_cache_request(test::repo_path("tests/data/fixtures/llama-gqa"), "span", exp::Backend::kPortable);
  req.config.attention_span = exp::AttentionSpan::kWritten;
  auto s = exp::export_model(req);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--attention-span written needs the KV cache"), std::string::npos)
      << s.status().message();
}

// --config / get_export_config: use_kv_cache round-trips, a wrong type names the key.
TEST(NoKvCache, ExportConfigJsonRoundTrips) {
  exp::ExportConfig c;
  EXPECT_TRUE(exp::config_to_json(c)["use_kv_cache"].get<bool>());
  c.use_kv_cache = false;
  auto back = exp::config_from_json(nlohmann::json::parse(exp::config_to_json(c).dump()), "test");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_FALSE(back->use_kv_cache);
  auto bad = exp::config_from_json(nlohmann::json{{"use_kv_cache", "no"}}, "cfg.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("field 'use_kv_cache' has wrong type; expected boolean"), std::string::npos)
      << bad.status().message();
}

// The CLI: export --no-kv-cache, run with the one input, generate with its
// one-line warning and the reference greedy ids, inspect in words.
TEST(NoKvCache, CliExportRunGenerateInspect) {
  const std::string fixture = test::repo_path("tests/data/fixtures/llama-gqa");
  const std::string dir = test::temp_dir("nokv-cli");
  auto run = [&](const std::string& args) { return test::run_cli(HF2PTE_CLI, args, dir); };
  auto ex = run("export " + fixture + " -o " + dir + "/m.pte --no-kv-cache --quiet");
  ASSERT_EQ(ex.exit_code, 0) << ex.err;

  auto ids = test::as_longs(test::load_npy(fixture + "/input_ids.npy"));
  const std::string ids_npy = dir + "/ids.npy";  // [1, T]: the fixture stores [T]
  ASSERT_TRUE(write_npy(ids_npy, HostTensor::from(ScalarType::kLong, {1, int64_t(ids.size())}, ids)).is_ok());
  auto r = run("run " + dir + "/m.pte --input " + ids_npy + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = test::as_floats(test::load_npy(dir + "/out/output_0.npy"));
  EXPECT_LE(test::max_abs_diff(got, test::as_floats(test::load_npy(fixture + "/logits.npy"))), kLogitsAtol);
  auto two = run("run " + dir + "/m.pte --input " + ids_npy + " --input " + ids_npy + " --output-dir " + dir + "/out2");
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("takes 1 inputs; got 2"), std::string::npos) << two.err;

  auto greedy = test::as_longs(test::load_npy(fixture + "/greedy.npy"));
  std::string prompt, expected;
  for (auto id : ids) prompt += (prompt.empty() ? "" : ",") + std::to_string(id);
  for (auto id : greedy) expected += std::to_string(id) + " ";
  auto g = run("generate " + dir + "/m.pte --prompt-ids " + prompt + " --print-ids --max-new-tokens " +
               std::to_string(greedy.size()));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, expected + "\n");
  EXPECT_EQ(std::count(g.err.begin(), g.err.end(), '\n'), 2) << g.err;  // the warning + the stats line
  EXPECT_NE(g.err.find("hf2pte: warning: the program has no KV cache"), std::string::npos) << g.err;

  // bench measures KV-cache decode: a one-line error, not a crash.
  auto b = run("bench " + dir + "/m.pte --gen 2 --prompt-len 2");
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_EQ(b.err.rfind("hf2pte: error: bench needs an LLM program with a KV cache", 0), 0u) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;

  auto i = run("inspect " + dir + "/m.pte");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("KV cache: none"), std::string::npos) << i.out;
}

}  // namespace
}  // namespace hf2pte
