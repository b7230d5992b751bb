// --logits last: forward returns the logits of the call's last position only,
// [1, 1, V]. Measured against the independent fixture references: the one row
// equals the last row of logits.npy within 1e-4 on both backends (a plain
// head, a tied head, a soft-capped head, a recurrent model), greedy decode reproduces greedy.npy,
// the export config records the choice, and a model that is not a decoder is
// refused with no output file.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include <nlohmann/json.hpp>

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

Result<std::string> export_last(const std::string& fixture, exp::Backend backend, const std::string& tag) {
  exp::ExportRequest req;
  req.model_dir = test::repo_path("tests/data/fixtures/" + fixture);
  req.output_path = test::temp_dir("last-logits-" + tag) + "/model.pte";
  req.config.backend = backend;
  req.config.last_logits = true;
  HF2PTE_RETURN_IF_ERROR(exp::export_model(req).status());
  return req.output_path;
}

using LastLogits = test::FixtureBackendTest;

TEST_P(LastLogits, PrefillGivesTheLastRowAndDecodeReproducesGreedy) {
  auto pte = export_last(name(), backend(), tag());
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  const std::string dir = this->dir();
  const auto ids = test::as_longs(test::load_npy(dir + "/input_ids.npy"));
  const auto ref = test::load_npy(dir + "/logits.npy");
  const int64_t V = ref.sizes.back();
  for (const rt::KernelRegistry* kernels : {&kernels::portable_registry(), &kernels::optimized_registry()}) {
    auto out = test::run_full_sequence(*pte, ids, *kernels);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->sizes, (std::vector<int64_t>{1, 1, V}));
    const auto all = test::as_floats(ref);
    const std::vector<float> want(all.end() - V, all.end()), got = test::as_floats(*out);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(test::max_abs_diff(got, want), kLogitsAtol);
    EXPECT_LE(test::expect_decode_reproduces_greedy(dir, *pte, *kernels, kLogitsAtol), kLogitsAtol);
  }
  auto file = pte::PteFile::open(*pte);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  std::string config;
  const auto j = pte::inspect_json(**file);
  for (const auto& m : j["methods"]) {
    if (m["name"] == "get_export_config") config = m["constant"]["value"].get<std::string>();
  }
  ASSERT_FALSE(config.empty());
  EXPECT_EQ(nlohmann::json::parse(config).value("logits", ""), "last");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LastLogits,
                         ::testing::Combine(::testing::Values("llama-gqa", "llama-gqa-tied-bf16", "gemma2", "mamba"),
                                            ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack)),
                         test::fixture_backend_name);

TEST(LastLogitsErrors, AnEncoderIsRefusedWithNoOutput) {
  const std::string out = test::temp_dir("last-logits-bert") + "/model.pte";
  exp::ExportRequest req;
  req.model_dir = test::repo_path("tests/data/fixtures/bert");
  req.output_path = out;
  req.config.last_logits = true;
  auto r = exp::export_model(req);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--logits last applies to decoder LLMs"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The --config JSON form: absent means all (programs keep the keys they had),
// "last" round-trips, an unknown value is named with the file.
TEST(LastLogitsConfig, RoundTripsAndRejectsUnknownValues) {
  exp::ExportConfig c;
  EXPECT_FALSE(exp::config_to_json(c).contains("logits"));
  c.last_logits = true;
  const auto j = exp::config_to_json(c);
  EXPECT_EQ(j["logits"], "last");
  auto back = exp::config_from_json(nlohmann::json::parse(j.dump()), "test");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_TRUE(back->last_logits);
  auto all = exp::config_from_json(nlohmann::json{{"logits", "all"}}, "cfg.json");
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  EXPECT_FALSE(all->last_logits);
  auto bad = exp::config_from_json(nlohmann::json{{"logits", "first"}}, "cfg.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("unknown logits choice 'first'; expected all or last"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("cfg.json"), std::string::npos) << bad.status().message();
  auto wrong_type = exp::config_from_json(nlohmann::json{{"logits", true}}, "cfg.json");
  EXPECT_FALSE(wrong_type.is_ok());
}

}  // namespace
}  // namespace hf2pte
