// --use-custom-sdpa: decoders call upstream's llama::update_cache and
// llama::custom_sdpa over [1, max_seq_len, kv_heads, head_dim] caches (what
// optimum-executorch's --use_custom_sdpa --use_custom_kv_cache exports).
// Correctness against the independent fixture references (logits within 1e-4,
// greedy ids exact) on both backends, through the portable and the optimized
// kernels, and with a cache the decode fills to its last row; the program
// carries the two ops and no index_put_; what custom_sdpa cannot express is a
// named error.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "decode_check.h"
#include "fixture_backend_case.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kLogitsAtol = 1e-4;  // fixtures README: tolerance_suggestion.logits_atol

Result<std::string> export_custom(const std::string& dir, const std::string& tag, exp::Backend backend,
                                  std::optional<int64_t> max_seq_len = std::nullopt) {
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = test::temp_dir("custom-sdpa-" + tag) + "/model.pte";
  req.config.backend = backend;
  req.config.max_seq_len = max_seq_len;
  req.config.use_custom_sdpa = true;
  auto s = exp::export_model(req);
  if (!s.is_ok()) return s.status();
  return req.output_path;
}

using CustomSdpaFixture = test::FixtureBackendTest;

TEST_P(CustomSdpaFixture, PrefillAndDecodeMatchReference) {
  auto pte = export_custom(dir(), tag(), backend());
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  double full = test::expect_full_sequence_logits(dir(), *pte, kernels::portable_registry(), kLogitsAtol);
  double decode = test::expect_decode_reproduces_greedy(dir(), *pte, kernels::portable_registry(), kLogitsAtol);
  double fast = test::expect_decode_reproduces_greedy(dir(), *pte, kernels::optimized_registry(), kLogitsAtol);
  RecordProperty("max_abs_logit_diff", test::diff_text(full));
  RecordProperty("max_abs_step_logit_diff", test::diff_text(std::max(decode, fast)));
}

// A cache exactly as long as the prompt plus the greedy steps: the last call
// writes row max_seq_len - 1 and attends over every row.
TEST_P(CustomSdpaFixture, DecodeUpToTheLastCacheRowMatchesReference) {
  const int64_t T = int64_t(test::as_longs(test::load_npy(dir() + "/input_ids.npy")).size());
  const int64_t G = int64_t(test::as_longs(test::load_npy(dir() + "/greedy.npy")).size());
  auto pte = export_custom(dir(), tag() + "-tight", backend(), T + G - 1);
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  double decode = test::expect_decode_reproduces_greedy(dir(), *pte, kernels::optimized_registry(), kLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(decode));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CustomSdpaFixture,
    ::testing::Combine(::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "qwen2", "llama3-rope",
                                         "qwen3", "gemma", "olmo2", "phi", "gpt_neox", "mixtral", "qwen3_moe", "gpt2"),
                       ::testing::Values(exp::Backend::kXnnpack, exp::Backend::kPortable)),
    test::fixture_backend_name);

TEST(CustomSdpa, ProgramCallsTheCustomOpsAndSaysSo) {
  auto pte = export_custom(test::repo_path("tests/data/fixtures/llama-gqa"), "ops", exp::Backend::kXnnpack);
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  auto file = pte::PteFile::open(*pte);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const auto j = pte::inspect_json(**file);
  std::map<std::string, uint64_t> calls;
  for (const auto& m : j["methods"]) {
    if (m["name"] != "forward") continue;
    for (const auto& op : m["operators"]) calls[op["name"].get<std::string>()] += op["instructions"].get<uint64_t>();
  }
  EXPECT_EQ(calls["llama::custom_sdpa.out"], 2u) << "one per layer (llama-gqa has 2)";
  EXPECT_EQ(calls["llama::update_cache.out"], 4u) << "K and V per layer";
  EXPECT_EQ(calls.count("aten::index_put_"), 0u) << "the caches are written by update_cache only";
  EXPECT_NE(j.dump().find("use_custom_sdpa"), std::string::npos) << "get_export_config records the flag";
}

TEST(CustomSdpa, WhatItCannotExpressIsANamedError) {
  struct Refusal {
    const char* fixture;
    const char* says;
  };
  for (const Refusal& r : {Refusal{"gemma2", "sliding-window"}, Refusal{"deepseek_v3", "latent attention"},
                           Refusal{"mamba", "no attention"}, Refusal{"bert", "decoder LLMs"},
                           Refusal{"gpt_oss", "sliding-window"}, Refusal{"mistral", "sliding-window"}}) {
    auto pte = export_custom(test::repo_path(std::string("tests/data/fixtures/") + r.fixture), std::string("no-") + r.fixture,
                             exp::Backend::kXnnpack);
    ASSERT_FALSE(pte.is_ok()) << r.fixture;
    EXPECT_NE(pte.status().message().find(r.says), std::string::npos) << r.fixture << ": " << pte.status().message();
    EXPECT_NE(pte.status().message().find("custom-sdpa"), std::string::npos) << pte.status().message();
  }
}

}  // namespace
}  // namespace hf2pte
