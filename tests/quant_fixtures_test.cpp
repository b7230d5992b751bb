// Quantized programs against independent references (tests/data/fixtures-quant:
// torchao's formulas applied to the tests/data/fixtures checkpoints by another
// harness, logits in float64): export with the case's recipe -> our runtime ->
// full-sequence logits within 1e-4 and greedy ids exact through the KV cache.
//
// Which cases a backend runs (fixtures-quant/README.md, "Recipes"): the portable
// backend keeps float32 scales, so every case but the `bf16scales` ones;
// XNNPACK stores 4-bit group scales in bf16 (qbint4, as upstream does), so its
// 8da4w is the `bf16scales` case, and it runs the per-channel 8da8w / 8w cases
// and 8w-g32 (8-bit blocks stay on the portable mixed_linear kernel) directly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "decode_check.h"
#include "quant_case.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kLogitsAtol = 1e-4;  // fixtures-quant README: comparison_suggestion

using test::QuantCase;

std::vector<std::string> all_cases() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(test::repo_path("tests/data/fixtures-quant"))) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool runs_on(const QuantCase& c, exp::Backend b) {
  if (b == exp::Backend::kPortable) return !c.bf16_scales;
  const bool group4 = (c.quant.qlinear == "8da4w" || c.quant.qlinear == "4w") && c.quant.qlinear_group_size > 0;
  if (group4) return c.bf16_scales && c.quant.qembedding.empty();
  return true;
}

/// The stored realization our HQQ (float32, left-to-right sums) reproduces
/// (recipe.json "hqq_alternate_realizations"): the float32_sequential entry's
/// files, or those of the realization it is "integers_identical_to"; the
/// primary files when no entry differs from the primary.
struct Reference {
  std::string logits = "logits.npy", greedy = "greedy.npy";
  bool has_step_logits = true;
};
Reference reference_of(const std::string& dir) {
  std::ifstream f(dir + "/recipe.json");
  auto j = nlohmann::json::parse(f);
  auto alts = j.value("hqq_alternate_realizations", nlohmann::json::array());
  auto find = [&](const std::string& summation) -> const nlohmann::json* {
    for (const auto& a : alts) if (a.value("summation", "") == summation) return &a;
    return nullptr;
  };
  const nlohmann::json* seq = find("float32_sequential");
  if (seq != nullptr && seq->contains("integers_identical_to")) seq = find((*seq)["integers_identical_to"].get<std::string>());
  if (seq == nullptr || !seq->contains("files")) return {};
  const auto& files = (*seq)["files"];
  return {files[0].get<std::string>(), files[1].get<std::string>(), false};
}

std::string export_case(const QuantCase& c, exp::Backend backend) {
  exp::ExportRequest req;
  req.config.backend = backend;
  req.config.quant = c.quant;
  req.config.validate = exp::ExportConfig::Validate::kAlways;
  req.model_dir = test::repo_path("tests/data/fixtures/" + c.preset);
  req.output_path = test::temp_dir(c.name + "-" + exp::backend_name(backend)) + "/model.pte";
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

/// Greedy ids through the KV cache (prefill, then one token per call) equal `greedy`.
void expect_greedy_ids(const std::string& pte, const std::vector<int64_t>& ids, const std::vector<int64_t>& greedy,
                       const rt::KernelRegistry& kernels) {
  auto program = rt::Program::load(pte);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto gen = llm::TextGenerator::create(*program, kernels);
  ASSERT_TRUE(gen.is_ok()) << gen.status().message();
  const int64_t V = (*gen)->vocab_size();
  auto logits = (*gen)->forward(ids, 0);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  std::vector<float> last(logits->end() - V, logits->end());
  std::vector<int64_t> produced;
  for (size_t k = 0; k < greedy.size(); ++k) {
    produced.push_back(int64_t(std::max_element(last.begin(), last.end()) - last.begin()));
    if (k + 1 == greedy.size()) break;
    auto step = (*gen)->forward({produced.back()}, int64_t(ids.size() + k));
    ASSERT_TRUE(step.is_ok()) << step.status().message();
    last = *step;
  }
  EXPECT_EQ(produced, greedy);
}

void check_case(const std::string& name, exp::Backend backend) {
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  const QuantCase c = test::parse_quant_case(name);
  if (!runs_on(c, backend)) GTEST_SKIP() << "not this backend's stored form (see the file comment)";
  const std::string dir = test::repo_path("tests/data/fixtures-quant/" + name);
  const std::string pte = export_case(c, backend);
  const Reference ref = reference_of(dir);
  auto ids = test::as_longs(test::load_npy(dir + "/input_ids.npy"));
  auto expected = test::load_npy(dir + "/" + ref.logits);
  for (const auto* kernels : {&portable_registry(), &optimized_registry()}) {
    auto out = test::run_full_sequence(pte, ids, *kernels);
    ASSERT_TRUE(out.has_value());
    const double diff = test::max_abs_diff(test::as_floats(*out), test::as_floats(expected));
    EXPECT_LE(diff, kLogitsAtol) << name << " vs " << ref.logits;
    ::testing::Test::RecordProperty("max_abs_logit_diff", test::diff_text(diff));
    if (ref.has_step_logits) {
      test::expect_decode_reproduces_greedy(dir, pte, *kernels, kLogitsAtol);
    } else {
      expect_greedy_ids(pte, ids, test::as_longs(test::load_npy(dir + "/" + ref.greedy)), *kernels);
    }
  }
}

class QuantFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantFixture, PortableMatchesReference) { check_case(GetParam(), exp::Backend::kPortable); }
TEST_P(QuantFixture, XnnpackMatchesReference) { check_case(GetParam(), exp::Backend::kXnnpack); }

INSTANTIATE_TEST_SUITE_P(FixturesQuant, QuantFixture, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string n = info.param;
  for (auto& ch : n) if (ch == '-') ch = '_';
  return n;
});

}  // namespace
}  // namespace hf2pte
