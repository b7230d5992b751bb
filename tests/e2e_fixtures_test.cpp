// End to end against independent references (tests/data/fixtures, computed by
// llama2.c, Meta's llama code, litgpt, gemma_pytorch, rasbt and Mistral's
// references in float64), one case per supported architecture feature:
// export -> our runtime -> logits within 1e-4, greedy ids exact through the KV cache.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "decode_check.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kLogitsAtol = 1e-4;  // fixtures README: tolerance_suggestion.logits_atol

// The portable program (reference kernels, no delegates): the default backend,
// XNNPACK, runs the same fixtures in xnnpack_export_test.cpp.
std::string export_fixture(const std::string& dir, const std::string& name) {
  exp::ExportRequest req;
  req.config.backend = exp::Backend::kPortable;
  req.model_dir = dir;
  req.output_path = test::temp_dir(name) + "/model.pte";
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

using test::diff_text;

class LlamaFamilyFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaFamilyFixture, FullSequenceLogitsMatchReference) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + GetParam());
  double diff = test::expect_full_sequence_logits(dir, export_fixture(dir, GetParam()), portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_logit_diff", diff_text(diff));
}

// Prefill then greedy decode through `kernels`: logits within 1e-4 of the
// reference at every step, ids exact.
void check_kv_cache_decode(const std::string& name, const rt::KernelRegistry& kernels) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + name);
  double worst = test::expect_decode_reproduces_greedy(dir, export_fixture(dir, name), kernels, kLogitsAtol);
  ::testing::Test::RecordProperty("max_abs_step_logit_diff", diff_text(worst));
}

TEST_P(LlamaFamilyFixture, KvCacheDecodeReproducesGreedy) { check_kv_cache_decode(GetParam(), portable_registry()); }

// The same through the optimized kernels (OpenBLAS prefill, SIMD GEMV decode).
TEST_P(LlamaFamilyFixture, OptimizedKernelsDecodeReproducesGreedy) {
  check_kv_cache_decode(GetParam(), optimized_registry());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaFamilyFixture,
                         ::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "mistral", "qwen2", "phi3",
                                           "llama3-rope", "qwen3", "gemma", "olmo2", "gemma2", "gemma3", "phi",
                                           "gpt_neox", "mixtral", "qwen3_moe", "gpt2", "gpt2-hubstyle", "gpt_oss",
                                           "deepseek_v3", "mamba"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n) if (c == '-') c = '_';
                           return n;
                         });

// A copy of fixture `name` whose config.json went through `edit`; returns its folder.
std::string modified_fixture(const std::string& name, const std::string& tag,
                             const std::function<void(nlohmann::json&)>& edit) {
  const std::string src = test::repo_path("tests/data/fixtures/" + name);
  const std::string dst = test::temp_dir(name + "-" + tag);
  std::filesystem::copy_file(src + "/model.safetensors", dst + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(src + "/config.json");
  auto config = nlohmann::json::parse(in);
  edit(config);
  std::ofstream(dst + "/config.json") << config.dump(2);
  return dst;
}

Status export_status(const std::string& dir) {
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = dir + "/model.pte";
  auto s = exp::export_model(req);
  return s.is_ok() ? Status::ok() : s.status();
}

// Config values that change the math but are not implemented fail by name
// instead of exporting a silently different model.
TEST(ArchitectureConfig, UnsupportedFieldsAreNamedErrors) {
  struct Case {
    const char* fixture;
    const char* tag;
    std::function<void(nlohmann::json&)> edit;
    const char* expected;
  };
  const Case cases[] = {
      {"llama3-rope", "yarn", [](auto& c) { c["rope_scaling"]["rope_type"] = "yarn"; }, "'yarn'"},
      {"llama3-rope", "dynamic-extra-field", [](auto& c) { c["rope_scaling"]["rope_type"] = "dynamic"; }, "does not support field"},
      {"qwen3_moe", "dense-layers", [](auto& c) { c["mlp_only_layers"] = {0}; }, "mlp_only_layers"},
      {"phi", "qk-layernorm", [](auto& c) { c["qk_layernorm"] = true; }, "qk_layernorm"},
      {"gpt_neox", "sequential", [](auto& c) { c["use_parallel_residual"] = false; }, "use_parallel_residual"},
      {"gemma", "relu", [](auto& c) { c["hidden_activation"] = "relu"; }, "'relu'"},
      {"gpt2", "layer-idx-scale", [](auto& c) { c["scale_attn_by_inverse_layer_idx"] = true; },
       "scale_attn_by_inverse_layer_idx"},
  };
  for (const auto& c : cases) {
    Status s = export_status(modified_fixture(c.fixture, c.tag, c.edit));
    ASSERT_FALSE(s.is_ok()) << c.fixture << " " << c.tag;
    EXPECT_EQ(s.code(), ErrorCode::kNotSupported) << s.message();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
  }
}

// Gemma 2's layer 0 slides over 8 positions and the fixture's sequences reach
// 21, so dropping the window must move the logits well past the tolerance:
// proof that the sliding mask is what makes the fixture pass.
TEST(ArchitectureConfig, Gemma2SlidingWindowIsApplied) {
  const std::string dir = modified_fixture("gemma2", "no-window", [](auto& c) { c["sliding_window"] = 4096; });
  ASSERT_TRUE(export_status(dir).is_ok());
  auto program = rt::Program::load(dir + "/model.pte");
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto gen = llm::TextGenerator::create(*program, portable_registry());
  ASSERT_TRUE(gen.is_ok()) << gen.status().message();
  const std::string ref_dir = test::repo_path("tests/data/fixtures/gemma2");
  // The reference's last step: forward of ids + greedy[:-1] (21 tokens).
  auto ids = test::as_longs(test::load_npy(ref_dir + "/input_ids.npy"));
  auto greedy = test::as_longs(test::load_npy(ref_dir + "/greedy.npy"));
  ids.insert(ids.end(), greedy.begin(), greedy.end() - 1);
  auto logits = (*gen)->forward(ids, 0);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  const int64_t V = (*gen)->vocab_size();
  auto step_ref = test::as_floats(test::load_npy(ref_dir + "/greedy_step_logits.npy"));
  std::vector<float> last(logits->end() - V, logits->end());
  std::vector<float> ref_last(step_ref.end() - V, step_ref.end());
  EXPECT_GT(test::max_abs_diff(last, ref_last), 1e-3);
}

// The bundled default model: a real pretrained 260K Llama (TinyStories). Its
// greedy continuation was computed by an independent float64 NumPy forward and
// confirmed by llama.cpp (models/stories260K/reference.json).
TEST(Stories260K, GreedyContinuationMatchesReference) {
  std::ifstream f(test::repo_path("models/stories260K/reference.json"));
  auto ref = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(ref.is_discarded());
  auto prompt = ref["prompt_ids_with_bos"].get<std::vector<int64_t>>();
  auto all = ref["greedy_ids"].get<std::vector<int64_t>>();
  std::vector<int64_t> expected(all.begin() + int64_t(prompt.size()), all.end());

  auto pte_path = export_fixture(test::repo_path("models/stories260K"), "stories260K");
  auto program = rt::Program::load(pte_path);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto gen = llm::TextGenerator::create(*program, portable_registry());
  ASSERT_TRUE(gen.is_ok()) << gen.status().message();
  llm::GenerationConfig cfg;
  cfg.max_new_tokens = int64_t(expected.size());
  cfg.stop_at_eos = false;
  auto ids = (*gen)->generate(prompt, cfg, nullptr, nullptr);
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  EXPECT_EQ(*ids, expected);
}

// alloc_graph_input=false / alloc_graph_output=false (issue 3, item 8): inputs
// and outputs are left out of the memory plan, `inspect` says so, and the
// program still reproduces the reference, both with Method-owned output memory
// and with a caller buffer the kernels write into directly.
TEST(MemoryPlan, UnplannedInputsAndOutputsStillMatchReference) {
  const auto dir = test::repo_path("tests/data/fixtures/llama-gqa");
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = test::temp_dir("unplanned") + "/model.pte";
  req.config.alloc_graph_input = false;
  req.config.alloc_graph_output = false;
  auto s = exp::export_model(req);
  ASSERT_TRUE(s.is_ok()) << s.status().message();

  auto file = pte::PteFile::open(req.output_path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const auto j = pte::inspect_json(**file);
  int checked = 0;
  for (const auto& m : j["methods"]) {
    if (m["name"] != "forward") continue;
    for (const char* side : {"inputs", "outputs"}) {
      for (const auto& v : m[side]) {
        EXPECT_EQ(v["data"], "none") << side << " " << v.dump();
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 3);  // tokens, cache_position -> logits

  test::expect_full_sequence_logits(dir, req.output_path, portable_registry(), kLogitsAtol);
  test::expect_decode_reproduces_greedy(dir, req.output_path, portable_registry(), kLogitsAtol);

  // A caller-owned logits buffer: the result lands in it without a copy.
  auto program = rt::Program::load(req.output_path);
  ASSERT_TRUE(program.is_ok());
  auto method = (*program)->load_method("forward", portable_registry());
  ASSERT_TRUE(method.is_ok()) << method.status().message();
  rt::Method& m = **method;
  ASSERT_FALSE(m.output_planned(0));
  const auto meta = m.output_meta(0);
  size_t bound_elems = 1;
  for (int64_t d : meta.sizes) bound_elems *= size_t(d);
  std::vector<float> logits_buffer(bound_elems, std::nanf(""));
  EXPECT_FALSE(m.set_output_buffer(0, logits_buffer.data(), 4).is_ok());  // too small for the bound
  ASSERT_TRUE(m.set_output_buffer(0, logits_buffer.data(), logits_buffer.size() * sizeof(float)).is_ok());
  const HostTensor ids = test::load_npy(dir + "/input_ids.npy");
  const int64_t T = ids.sizes.back();
  HostTensor tokens = ids;
  tokens.sizes = {1, T};
  HostTensor pos;
  pos.dtype = ScalarType::kLong;
  pos.sizes = {T};
  pos.bytes.resize(size_t(T) * sizeof(int64_t));
  for (int64_t t = 0; t < T; ++t) std::memcpy(pos.bytes.data() + t * 8, &t, 8);
  ASSERT_TRUE(m.set_input(0, tokens).is_ok());
  ASSERT_TRUE(m.set_input(1, pos).is_ok());
  ASSERT_TRUE(m.execute().is_ok());
  const HostTensor ref = test::load_npy(dir + "/logits.npy");
  const auto* want = reinterpret_cast<const float*>(ref.bytes.data());
  double worst = 0;
  for (size_t i = 0; i < ref.bytes.size() / sizeof(float); ++i) {
    worst = std::max(worst, double(std::fabs(logits_buffer[i] - want[i])));
  }
  EXPECT_LE(worst, kLogitsAtol);
}

}  // namespace
}  // namespace hf2pte
