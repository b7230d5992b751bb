// Families without an independent reference case (Granite, SmolLM3, StableLM,
// Starcoder2, Qwen2-MoE, Phi-3.5 longrope, yarn / dynamic RoPE): each runs end
// to end, checked by properties that tie it to the reference fixtures in
// tests/data/fixtures:
//  - a checkpoint rebuilt from a fixture's weights under the new model_type,
//    with the new knobs set so that the math coincides (power-of-two
//    multipliers compensated in the weights, zero shared expert, NoPE off,
//    unit RoPE factors), must reproduce the fixture's logits within 1e-4 and
//    its greedy ids through the KV cache;
//  - each such test has a control (the knob ignored / set differently) that
//    moves the logits well past the tolerance, so it cannot pass vacuously;
//  - StableLM and Starcoder2 (LayerNorm + biases, no fixture shares their
//    math) are compared with a naive double-precision forward written here
//    from the transformers modeling code, independent of src/models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/test/test_util.h"
#include "decode_check.h"
#include "export/exporter.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "models/arch.h"
#include "runtime/program.h"
#include "test_util.h"

namespace hf2pte {
namespace {

using nlohmann::json;

constexpr double kLogitsAtol = 1e-4;  // fixtures README: tolerance_suggestion.logits_atol
constexpr double kControlMin = 1e-3;  // a control must move the logits at least this much

using test::diff_text;
using Tensor = test::F32Tensor;
using Tensors = test::F32Tensors;

std::string fixture(const std::string& name) { return test::repo_path("tests/data/fixtures/" + name); }

json fixture_config(const std::string& name) {
  std::ifstream in(fixture(name) + "/config.json");
  return json::parse(in);
}

Tensors fixture_tensors(const std::string& name) { return test::read_f32_tensors(fixture(name)); }

/// Writes config.json + model.safetensors into a fresh folder; returns it.
std::string write_checkpoint(const std::string& tag, const json& config, const Tensors& tensors) {
  const std::string dir = test::temp_dir("families-" + tag);
  test::write_f32_checkpoint(dir, tensors, config.dump(2));
  return dir;
}

Result<std::string> export_dir(const std::string& dir, std::optional<int64_t> max_seq_len = std::nullopt) {
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = dir + "/model.pte";
  req.config.max_seq_len = max_seq_len;
  auto s = exp::export_model(req);
  if (!s.is_ok()) return s.status();
  return req.output_path;
}

/// forward(ids, positions 0..T-1) -> logits [T * V].
std::vector<float> run_logits(const std::string& pte, const std::vector<int64_t>& ids) {
  auto out = test::run_full_sequence(pte, ids, portable_registry());
  return out ? test::as_floats(*out) : std::vector<float>{};
}

/// Through the KV cache: prefill ids[0, prefill), then one token per call.
/// Returns the logits rows of positions prefill - 1 .. T - 1, concatenated.
std::vector<float> decode_rows(const std::string& pte, const std::vector<int64_t>& ids, size_t prefill) {
  auto program = rt::Program::load(pte);
  EXPECT_TRUE(program.is_ok()) << program.status().message();
  if (!program.is_ok()) return {};
  auto gen = llm::TextGenerator::create(*program, portable_registry());
  EXPECT_TRUE(gen.is_ok()) << gen.status().message();
  if (!gen.is_ok()) return {};
  const int64_t V = (*gen)->vocab_size();
  std::vector<float> rows;
  auto first = (*gen)->forward(std::vector<int64_t>(ids.begin(), ids.begin() + int64_t(prefill)), 0);
  EXPECT_TRUE(first.is_ok());
  if (!first.is_ok()) return {};
  rows.insert(rows.end(), first->end() - V, first->end());
  for (size_t t = prefill; t < ids.size(); ++t) {
    auto step = (*gen)->forward({ids[t]}, int64_t(t));
    EXPECT_TRUE(step.is_ok());
    if (!step.is_ok()) return {};
    rows.insert(rows.end(), step->end() - V, step->end());
  }
  return rows;
}

std::vector<int64_t> fixture_ids(const std::string& name) {
  return test::as_longs(test::load_npy(fixture(name) + "/input_ids.npy"));
}
std::vector<float> fixture_logits(const std::string& name) {
  return test::as_floats(test::load_npy(fixture(name) + "/logits.npy"));
}

/// The derived checkpoint reproduces fixture `name`: full-sequence logits and greedy decode.
void expect_reproduces_fixture(const std::string& name, const std::string& dir,
                               std::optional<int64_t> max_seq_len = std::nullopt) {
  auto pte = export_dir(dir, max_seq_len);
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  double full = test::expect_full_sequence_logits(fixture(name), *pte, portable_registry(), kLogitsAtol);
  double step = test::expect_decode_reproduces_greedy(fixture(name), *pte, portable_registry(), kLogitsAtol);
  ::testing::Test::RecordProperty("max_abs_logit_diff", diff_text(std::max(full, step)));
}

/// A control: the checkpoint exports and its logits differ from the fixture's by more than kControlMin.
void expect_differs_from_fixture(const std::string& name, const std::string& dir,
                                 std::optional<int64_t> max_seq_len = std::nullopt) {
  auto pte = export_dir(dir, max_seq_len);
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  EXPECT_GT(test::max_abs_diff(run_logits(*pte, fixture_ids(name)), fixture_logits(name)), kControlMin) << dir;
}

void scale(Tensor& t, float s) {
  for (float& v : t.data) v *= s;
}
void scale_matching(Tensors& ts, const std::string& needle, float s) {
  for (auto& [n, t] : ts) {
    if (n.find(needle) != std::string::npos) scale(t, s);
  }
}

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float stddev) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor t{std::move(shape), std::vector<float>(static_cast<size_t>(n))};
  for (float& v : t.data) v = d(gen);
  return t;
}
Tensor zeros(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return Tensor{std::move(shape), std::vector<float>(static_cast<size_t>(n), 0.0f)};
}

// ---- Granite -----------------------------------------------------------------

// Every multiplier is a power of two compensated exactly in the weights:
// embeddings / 2 with embedding_multiplier 2, o_proj and down_proj / 2 with
// residual_multiplier 2, q_proj * 2 with attention_multiplier = head_dim^-0.5 / 2,
// lm_head * 4 with logits_scaling 4. Float scaling by 2^k is exact, so the
// program must reproduce llama-gqa.
json granite_config() {
  json c = fixture_config("llama-gqa");
  c["model_type"] = "granite";
  c["architectures"] = {"GraniteForCausalLM"};
  c["embedding_multiplier"] = 2.0;
  c["residual_multiplier"] = 2.0;
  c["attention_multiplier"] = 0.25 / 2;  // head_dim 16
  c["logits_scaling"] = 4.0;
  return c;
}
Tensors granite_tensors() {
  Tensors t = fixture_tensors("llama-gqa");
  scale_matching(t, "embed_tokens", 0.5f);
  scale_matching(t, "o_proj", 0.5f);
  scale_matching(t, "down_proj", 0.5f);
  scale_matching(t, "q_proj", 2.0f);
  scale_matching(t, "lm_head", 4.0f);
  return t;
}

TEST(Granite, CompensatedMultipliersReproduceLlama) {
  expect_reproduces_fixture("llama-gqa", write_checkpoint("granite", granite_config(), granite_tensors()));
}

TEST(Granite, EachMultiplierIsApplied) {
  // Controls: reset one multiplier to its default 1 and the compensation breaks.
  for (const char* key : {"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"}) {
    json c = granite_config();
    c.erase(key);
    expect_differs_from_fixture("llama-gqa", write_checkpoint(std::string("granite-no-") + key, c, granite_tensors()));
  }
}

// ---- SmolLM3 -----------------------------------------------------------------

json smollm3_config(const json& no_rope_layers) {
  json c = fixture_config("llama-gqa");
  c["model_type"] = "smollm3";
  c["architectures"] = {"SmolLM3ForCausalLM"};
  if (!no_rope_layers.is_null()) c["no_rope_layers"] = no_rope_layers;
  return c;
}

TEST(SmolLM3, WithoutNoPeLayersIsLlama) {
  // no_rope_layer_interval's default 4 leaves both layers of the 2-layer fixture with RoPE.
  expect_reproduces_fixture("llama-gqa", write_checkpoint("smollm3-default", smollm3_config(nullptr), fixture_tensors("llama-gqa")));
  expect_reproduces_fixture("llama-gqa", write_checkpoint("smollm3-all-rope", smollm3_config({1, 1}), fixture_tensors("llama-gqa")));
  // Control: one NoPE layer changes the model.
  expect_differs_from_fixture("llama-gqa", write_checkpoint("smollm3-one-nope", smollm3_config({1, 0}), fixture_tensors("llama-gqa")));
  json interval = smollm3_config(nullptr);
  interval["no_rope_layer_interval"] = 2;  // layer 1 is NoPE
  expect_differs_from_fixture("llama-gqa", write_checkpoint("smollm3-interval", interval, fixture_tensors("llama-gqa")));
}

TEST(SmolLM3, NoPeLayersIgnorePositions) {
  // One layer (llama-gqa's first). Without RoPE, causal attention sees the
  // earlier tokens as a set: permuting them leaves the last token's logits
  // unchanged. With RoPE they move. (With two layers the earlier tokens'
  // layer-1 states depend on their own prefixes, so only one layer has this property.)
  Tensors one_layer;
  for (auto& [n, t] : fixture_tensors("llama-gqa")) {
    if (n.find("layers.1.") == std::string::npos) one_layer[n] = t;
  }
  auto config = [](int rope) {
    json c = smollm3_config({rope});
    c["num_hidden_layers"] = 1;
    return c;
  };
  auto ids = fixture_ids("llama-gqa");
  auto permuted = ids;
  std::reverse(permuted.begin(), permuted.end() - 1);
  ASSERT_NE(ids, permuted);
  auto last = [](const std::vector<float>& l, size_t V) { return std::vector<float>(l.end() - int64_t(V), l.end()); };
  const size_t V = 512;
  auto nope = export_dir(write_checkpoint("smollm3-nope", config(0), one_layer));
  ASSERT_TRUE(nope.is_ok()) << nope.status().message();
  EXPECT_LE(test::max_abs_diff(last(run_logits(*nope, ids), V), last(run_logits(*nope, permuted), V)), 1e-5);
  auto rope = export_dir(write_checkpoint("smollm3-rope", config(1), one_layer));
  ASSERT_TRUE(rope.is_ok()) << rope.status().message();
  EXPECT_GT(test::max_abs_diff(last(run_logits(*rope, ids), V), last(run_logits(*rope, permuted), V)), kControlMin);
}

// ---- Qwen2-MoE ---------------------------------------------------------------

/// Mixtral's experts under Qwen2-MoE names, plus zero q/k/v biases and a shared expert.
Tensors qwen2_moe_from_mixtral(bool zero_shared_down) {
  Tensors src = fixture_tensors("mixtral"), out;
  const json c = fixture_config("mixtral");
  const int64_t H = c["hidden_size"], layers = c["num_hidden_layers"], kvd = 2 * (H / 4), SI = 8;
  for (auto& [n, t] : src) {
    std::string m = n;
    auto replace = [&](const std::string& from, const std::string& to) {
      if (auto p = m.find(from); p != std::string::npos) m.replace(p, from.size(), to);
    };
    replace("block_sparse_moe.gate.", "mlp.gate.");
    replace("block_sparse_moe.experts.", "mlp.experts.");
    replace(".w1.", ".gate_proj.");
    replace(".w3.", ".up_proj.");
    replace(".w2.", ".down_proj.");
    out[m] = std::move(t);
  }
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    out[p + ".self_attn.q_proj.bias"] = zeros({H});
    out[p + ".self_attn.k_proj.bias"] = zeros({kvd});
    out[p + ".self_attn.v_proj.bias"] = zeros({kvd});
    out[p + ".mlp.shared_expert.gate_proj.weight"] = random_tensor({SI, H}, uint32_t(10 + i), 0.1f);
    out[p + ".mlp.shared_expert.up_proj.weight"] = random_tensor({SI, H}, uint32_t(20 + i), 0.1f);
    out[p + ".mlp.shared_expert.down_proj.weight"] =
        zero_shared_down ? zeros({H, SI}) : random_tensor({H, SI}, uint32_t(30 + i), 0.1f);
    out[p + ".mlp.shared_expert_gate.weight"] = random_tensor({1, H}, uint32_t(40 + i), 0.1f);
  }
  return out;
}

json qwen2_moe_config_from_mixtral() {
  json c = fixture_config("mixtral");
  c["model_type"] = "qwen2_moe";
  c["architectures"] = {"Qwen2MoeForCausalLM"};
  c["num_experts"] = c["num_local_experts"];
  c.erase("num_local_experts");
  c["moe_intermediate_size"] = c["intermediate_size"];
  c["shared_expert_intermediate_size"] = 8;
  c["norm_topk_prob"] = true;  // Mixtral renormalises its top-2
  return c;
}

TEST(Qwen2Moe, ZeroSharedExpertReproducesMixtral) {
  expect_reproduces_fixture("mixtral", write_checkpoint("qwen2-moe", qwen2_moe_config_from_mixtral(), qwen2_moe_from_mixtral(true)));
  // Controls: a live shared expert, and Qwen2-MoE's default norm_topk_prob false (un-renormalised top-2).
  expect_differs_from_fixture("mixtral", write_checkpoint("qwen2-moe-shared", qwen2_moe_config_from_mixtral(), qwen2_moe_from_mixtral(false)));
  json raw = qwen2_moe_config_from_mixtral();
  raw.erase("norm_topk_prob");
  expect_differs_from_fixture("mixtral", write_checkpoint("qwen2-moe-raw-topk", raw, qwen2_moe_from_mixtral(true)));
}

TEST(Qwen2Moe, OneExpertPlusGatedSharedExpertIsTheDenseMlp) {
  // llama-gqa's MLP split in two exact halves: the only routed expert (weight
  // softmax over one expert = 1, norm_topk_prob false) has down_proj / 2, the
  // shared expert the full MLP behind a zero gate (sigmoid(0) = 1/2).
  Tensors src = fixture_tensors("llama-gqa"), out;
  const json fc = fixture_config("llama-gqa");
  const int64_t H = fc["hidden_size"], I = fc["intermediate_size"], kvd = 2 * 16;
  for (auto& [n, t] : src) {
    if (n.find(".mlp.") == std::string::npos) {
      out[n] = t;
      continue;
    }
    const std::string layer = n.substr(0, n.find(".mlp.") + 5), proj = n.substr(n.find(".mlp.") + 5);
    Tensor half = t;
    if (proj.starts_with("down_proj")) scale(half, 0.5f);
    out[layer + "experts.0." + proj] = half;
    out[layer + "shared_expert." + proj] = t;
  }
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    out[p + ".mlp.gate.weight"] = random_tensor({1, H}, uint32_t(50 + i), 0.1f);
    out[p + ".mlp.shared_expert_gate.weight"] = zeros({1, H});
    out[p + ".self_attn.q_proj.bias"] = zeros({H});
    out[p + ".self_attn.k_proj.bias"] = zeros({kvd});
    out[p + ".self_attn.v_proj.bias"] = zeros({kvd});
  }
  json c = fc;
  c["model_type"] = "qwen2_moe";
  c["num_experts"] = 1;
  c["num_experts_per_tok"] = 1;
  c["moe_intermediate_size"] = I;
  c["shared_expert_intermediate_size"] = I;
  expect_reproduces_fixture("llama-gqa", write_checkpoint("qwen2-moe-one-expert", c, out));
  // Control: a positive shared gate (sigmoid > 1/2) breaks the halves.
  for (int i = 0; i < 2; ++i) {
    auto& g = out["model.layers." + std::to_string(i) + ".mlp.shared_expert_gate.weight"];
    g = random_tensor({1, H}, uint32_t(60 + i), 0.5f);
  }
  expect_differs_from_fixture("llama-gqa", write_checkpoint("qwen2-moe-one-expert-gated", c, out));
}

// ---- RoPE scalings end to end ---------------------------------------------------

TEST(RopeScaling, UnitYarnAndDynamicWithinContextAreLlama) {
  // yarn with factor 1: interpolation == extrapolation, attention factor 1.
  json yarn = fixture_config("llama-gqa");
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 1.0}, {"original_max_position_embeddings", 256}};
  expect_reproduces_fixture("llama-gqa", write_checkpoint("yarn-unit", yarn, fixture_tensors("llama-gqa")));
  // transformers 5.x spelling: rope_parameters carrying rope_theta, and dtype.
  json v5 = fixture_config("llama-gqa");
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5.erase("torch_dtype");
  v5["dtype"] = "float32";
  v5["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 4.0}, {"rope_theta", 500000.0}};
  // Dynamic NTK within max_position_embeddings (256) is plain RoPE.
  expect_reproduces_fixture("llama-gqa", write_checkpoint("dynamic-v5", v5, fixture_tensors("llama-gqa")));
  // Controls: yarn factor 4 and dynamic beyond the trained context change the frequencies.
  yarn["rope_scaling"]["factor"] = 4.0;
  expect_differs_from_fixture("llama-gqa", write_checkpoint("yarn-4", yarn, fixture_tensors("llama-gqa")));
  expect_differs_from_fixture("llama-gqa", write_checkpoint("dynamic-long", v5, fixture_tensors("llama-gqa")), 1024);
}

// Phi-3.5 style longrope on the phi3 fixture (original context 256): unit
// factors on the side the exported length selects reproduce the fixture.
TEST(RopeScaling, LongRopeSelectsFactorsByMaxSeqLen) {
  const std::vector<double> ones(8, 1.0), other = {1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 8.0, 16.0};
  auto config = [&](const std::vector<double>& short_f, const std::vector<double>& long_f, bool attention_factor) {
    json c = fixture_config("phi3");
    c["max_position_embeddings"] = 1024;  // extended context; original_max_position_embeddings stays 256
    c["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_f}, {"long_factor", long_f}};
    if (attention_factor) c["rope_scaling"]["attention_factor"] = 1.0;
    return c;
  };
  auto w = [] { return fixture_tensors("phi3"); };
  expect_reproduces_fixture("phi3", write_checkpoint("longrope-short", config(ones, other, true), w()), 256);
  expect_reproduces_fixture("phi3", write_checkpoint("longrope-long", config(other, ones, true), w()), 512);
  // Controls: the other side's factors, and the default attention factor sqrt(1 + ln 4 / ln 256).
  expect_differs_from_fixture("phi3", write_checkpoint("longrope-short-c", config(ones, other, true), w()), 512);
  expect_differs_from_fixture("phi3", write_checkpoint("longrope-attn", config(ones, ones, false), w()), 256);
}

TEST(RopeScaling, UnknownTypeOrFieldIsANamedError) {
  json c = fixture_config("llama-gqa");
  c["rope_scaling"] = {{"rope_type", "su-v2"}, {"factor", 2.0}};
  auto s = export_dir(write_checkpoint("rope-unknown", c, fixture_tensors("llama-gqa")));
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(s.status().message().find("'su-v2'"), std::string::npos) << s.status().message();
  c["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"extrapolation_factor", 1.0}};
  c.erase("rope_scaling");
  s = export_dir(write_checkpoint("rope-field", c, fixture_tensors("llama-gqa")));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("'extrapolation_factor'"), std::string::npos) << s.status().message();
}

// ---- StableLM and Starcoder2 against a naive forward ------------------------------

/// The math of a sequential pre-norm decoder as transformers' StableLM /
/// Starcoder2 modeling code writes it, in double, straight from the tensors.
struct NaiveDecoder {
  const Tensors& w;
  int64_t H, heads, kv_heads, head_dim, rotary_dim, layers, V;
  double eps, theta;
  bool gated;                   // gate/up/down (StableLM) vs c_fc/c_proj (Starcoder2)
  std::optional<int64_t> window;
  std::string lm_head = "lm_head.weight";
  bool rms = false;                    // RMSNorm (Phi-3) instead of LayerNorm
  std::vector<double> rope_divisors;   // longrope's per-dim factors (empty: 1)
  double attention_factor = 1.0;       // longrope / yarn: multiplies cos and sin

  const std::vector<float>& t(const std::string& n) const {
    auto it = w.find(n);
    EXPECT_NE(it, w.end()) << n;
    return it->second.data;
  }
  bool has(const std::string& n) const { return w.count(n) != 0; }

  std::vector<double> layer_norm(const std::vector<double>& x, const std::string& p) const {
    if (rms) {
      double ms = 0;
      for (double v : x) ms += v * v;
      ms /= double(x.size());
      const auto& g = t(p + ".weight");
      std::vector<double> y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * g[i];
      return y;
    }
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= double(x.size());
    for (double v : x) var += (v - mean) * (v - mean);
    var /= double(x.size());
    const auto& g = t(p + ".weight");
    const auto& b = t(p + ".bias");
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
    return y;
  }
  std::vector<double> linear(const std::vector<double>& x, const std::string& p, int64_t out) const {
    const auto& W = t(p + ".weight");
    std::vector<double> y(static_cast<size_t>(out), 0.0);
    if (has(p + ".bias")) {
      const auto& b = t(p + ".bias");
      for (int64_t o = 0; o < out; ++o) y[size_t(o)] = b[size_t(o)];
    }
    for (int64_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < x.size(); ++i) y[size_t(o)] += double(W[size_t(o) * x.size() + i]) * x[i];
    }
    return y;
  }
  void rope(std::vector<double>& x, int64_t nh, int64_t pos) const {
    const int64_t half = rotary_dim / 2;
    for (int64_t h = 0; h < nh; ++h) {
      double* v = x.data() + h * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const double divisor = rope_divisors.empty() ? 1.0 : rope_divisors[size_t(j)];
        const double a = double(pos) / (divisor * std::pow(theta, double(2 * j) / double(rotary_dim)));
        const double c = std::cos(a) * attention_factor, s = std::sin(a) * attention_factor;
        const double x1 = v[j], x2 = v[j + half];
        v[j] = x1 * c - x2 * s;
        v[j + half] = x2 * c + x1 * s;
      }
    }
  }
  static double act(double x, bool gated) {
    if (gated) return x / (1 + std::exp(-x));  // silu
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }

  std::vector<float> forward(const std::vector<int64_t>& ids) const {
    const auto T = int64_t(ids.size());
    const auto& E = t("model.embed_tokens.weight");
    std::vector<std::vector<double>> x(ids.size());
    for (int64_t s = 0; s < T; ++s) x[size_t(s)].assign(E.begin() + ids[size_t(s)] * H, E.begin() + (ids[size_t(s)] + 1) * H);
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l);
      std::vector<std::vector<double>> q(x.size()), k(x.size()), v(x.size());
      for (int64_t s = 0; s < T; ++s) {
        auto h = layer_norm(x[size_t(s)], p + ".input_layernorm");
        q[size_t(s)] = linear(h, p + ".self_attn.q_proj", heads * head_dim);
        k[size_t(s)] = linear(h, p + ".self_attn.k_proj", kv_heads * head_dim);
        v[size_t(s)] = linear(h, p + ".self_attn.v_proj", kv_heads * head_dim);
        rope(q[size_t(s)], heads, s);
        rope(k[size_t(s)], kv_heads, s);
      }
      for (int64_t s = 0; s < T; ++s) {
        std::vector<double> attn(static_cast<size_t>(heads * head_dim), 0.0);
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t g = h / (heads / kv_heads);
          std::vector<double> scores;
          for (int64_t u = 0; u <= s; ++u) {
            const bool visible = !window || s - u < *window;
            double d = 0;
            for (int64_t j = 0; j < head_dim; ++j) d += q[size_t(s)][size_t(h * head_dim + j)] * k[size_t(u)][size_t(g * head_dim + j)];
            scores.push_back(visible ? d / std::sqrt(double(head_dim)) : -INFINITY);
          }
          const double mx = *std::max_element(scores.begin(), scores.end());
          double sum = 0;
          for (double& sc : scores) sum += (sc = std::exp(sc - mx));
          for (int64_t u = 0; u <= s; ++u) {
            for (int64_t j = 0; j < head_dim; ++j) {
              attn[size_t(h * head_dim + j)] += scores[size_t(u)] / sum * v[size_t(u)][size_t(g * head_dim + j)];
            }
          }
        }
        auto o = linear(attn, p + ".self_attn.o_proj", H);
        for (int64_t i = 0; i < H; ++i) x[size_t(s)][size_t(i)] += o[size_t(i)];
        auto h2 = layer_norm(x[size_t(s)], p + ".post_attention_layernorm");
        std::vector<double> m;
        if (gated) {
          auto gt = linear(h2, p + ".mlp.gate_proj", int64_t(t(p + ".mlp.gate_proj.weight").size()) / H);
          auto up = linear(h2, p + ".mlp.up_proj", int64_t(gt.size()));
          for (size_t i = 0; i < gt.size(); ++i) gt[i] = act(gt[i], true) * up[i];
          m = linear(gt, p + ".mlp.down_proj", H);
        } else {
          auto fc = linear(h2, p + ".mlp.c_fc", int64_t(t(p + ".mlp.c_fc.weight").size()) / H);
          for (double& f : fc) f = act(f, false);
          m = linear(fc, p + ".mlp.c_proj", H);
        }
        for (int64_t i = 0; i < H; ++i) x[size_t(s)][size_t(i)] += m[size_t(i)];
      }
    }
    std::vector<float> logits;
    for (int64_t s = 0; s < T; ++s) {
      auto h = layer_norm(x[size_t(s)], "model.norm");
      const auto& W = t(lm_head);
      for (int64_t o = 0; o < V; ++o) {
        double d = 0;
        for (int64_t i = 0; i < H; ++i) d += double(W[size_t(o * H + i)]) * h[size_t(i)];
        logits.push_back(float(d));
      }
    }
    return logits;
  }
};

/// llama-gqa's weights with LayerNorm biases and random q/k/v(/o, MLP) biases added.
Tensors with_biases(Tensors t, bool attn_o_and_mlp, bool gated) {
  const int64_t H = 96, kvd = 32, I = 256;
  uint32_t seed = 100;
  auto add = [&](const std::string& n, int64_t size) { t[n] = random_tensor({size}, seed++, 0.05f); };
  add("model.norm.bias", H);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    add(p + ".input_layernorm.bias", H);
    add(p + ".post_attention_layernorm.bias", H);
    add(p + ".self_attn.q_proj.bias", H);
    add(p + ".self_attn.k_proj.bias", kvd);
    add(p + ".self_attn.v_proj.bias", kvd);
    if (attn_o_and_mlp) {
      add(p + ".self_attn.o_proj.bias", H);
      add(p + (gated ? ".mlp.up_proj.bias" : ".mlp.c_fc.bias"), I);
      add(p + (gated ? ".mlp.down_proj.bias" : ".mlp.c_proj.bias"), H);
    }
  }
  return t;
}

TEST(StableLm, MatchesNaiveForward) {
  // LayerNorm with bias, partial rotary (default 0.25 of head_dim 16), q/k/v biases, gated SiLU MLP.
  json c = fixture_config("llama-gqa");
  c["model_type"] = "stablelm";
  c["architectures"] = {"StableLmForCausalLM"};
  c["use_qkv_bias"] = true;
  c["layer_norm_eps"] = 1e-5;
  c.erase("rms_norm_eps");
  const Tensors w = with_biases(fixture_tensors("llama-gqa"), false, true);
  auto pte = export_dir(write_checkpoint("stablelm", c, w));
  ASSERT_TRUE(pte.is_ok()) << pte.status().message();
  NaiveDecoder ref{w, 96, 6, 2, 16, 4, 2, 512, 1e-5, 500000.0, true, std::nullopt, "lm_head.weight", false, {}, 1.0};
  const auto ids = fixture_ids("llama-gqa");
  const auto expected = ref.forward(ids);
  const auto got = run_logits(*pte, ids);
  const double diff = test::max_abs_diff(got, expected);
  EXPECT_LE(diff, kLogitsAtol);
  RecordProperty("max_abs_logit_diff", diff_text(diff));
  NaiveDecoder full_rotary = ref;  // control: partial rotary matters
  full_rotary.rotary_dim = 16;
  EXPECT_GT(test::max_abs_diff(got, full_rotary.forward(ids)), kControlMin);
  // Control: without use_qkv_bias the biases are unused tensors, which is an error naming one.
  c.erase("use_qkv_bias");
  auto refused = export_dir(write_checkpoint("stablelm-no-bias", c, w));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("q_proj.bias"), std::string::npos) << refused.status().message();
  // Unsupported variants are named.
  c["use_qkv_bias"] = true;
  for (const char* key : {"qk_layernorm", "use_parallel_residual"}) {
    json v = c;
    v[key] = true;
    auto s = export_dir(write_checkpoint(std::string("stablelm-") + key, v, w));
    ASSERT_FALSE(s.is_ok()) << key;
    EXPECT_NE(s.status().message().find(key), std::string::npos) << s.status().message();
  }
}

json starcoder2_config(std::optional<int64_t> window) {
  json c = fixture_config("llama-gqa");
  c["model_type"] = "starcoder2";
  c["architectures"] = {"Starcoder2ForCausalLM"};
  c["norm_epsilon"] = 1e-5;
  c.erase("rms_norm_eps");
  c.erase("tie_word_embeddings");  // Starcoder2's default: tied
  c.erase("hidden_act");           // default gelu_pytorch_tanh
  c["sliding_window"] = window ? json(*window) : json(nullptr);
  return c;
}

Tensors starcoder2_tensors() {
  Tensors src = fixture_tensors("llama-gqa"), out;
  for (auto& [n, t] : src) {
    if (n.find("gate_proj") != std::string::npos || n == "lm_head.weight") continue;  // plain MLP, tied head
    std::string m = n;
    if (auto p = m.find("mlp.up_proj"); p != std::string::npos) m.replace(p, 11, "mlp.c_fc");
    if (auto p = m.find("mlp.down_proj"); p != std::string::npos) m.replace(p, 13, "mlp.c_proj");
    out[m] = std::move(t);
  }
  return with_biases(out, true, false);
}

TEST(Starcoder2, MatchesNaiveForwardWithAndWithoutWindow) {
  const Tensors w = starcoder2_tensors();
  const auto ids = fixture_ids("llama-gqa");  // 10 tokens
  NaiveDecoder ref{w, 96, 6, 2, 16, 16, 2, 512, 1e-5, 500000.0, false, std::nullopt, "model.embed_tokens.weight",
                   false, {}, 1.0};
  auto full = export_dir(write_checkpoint("starcoder2", starcoder2_config(std::nullopt), w));
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  const auto no_window = run_logits(*full, ids);
  const double diff = test::max_abs_diff(no_window, ref.forward(ids));
  EXPECT_LE(diff, kLogitsAtol);
  RecordProperty("max_abs_logit_diff", diff_text(diff));

  // A window of 4 < 10 tokens: prefill honours it (the naive forward masks the same keys)...
  ref.window = 4;
  auto windowed = export_dir(write_checkpoint("starcoder2-w4", starcoder2_config(4), w));
  ASSERT_TRUE(windowed.is_ok()) << windowed.status().message();
  const auto w4 = run_logits(*windowed, ids);
  const auto w4_ref = ref.forward(ids);
  EXPECT_LE(test::max_abs_diff(w4, w4_ref), kLogitsAtol);
  EXPECT_GT(test::max_abs_diff(w4, no_window), kControlMin);
  // ...and so does decode: prefill 3 tokens, then 7 steps, most of them past the window.
  const size_t prefill = 3, V = 512;
  EXPECT_LE(test::max_abs_diff(decode_rows(*windowed, ids, prefill),
                               std::vector<float>(w4_ref.begin() + int64_t((prefill - 1) * V), w4_ref.end())),
            kLogitsAtol);
  // ...and a window >= the context is no window at all.
  auto wide = export_dir(write_checkpoint("starcoder2-w10", starcoder2_config(10), w));
  ASSERT_TRUE(wide.is_ok()) << wide.status().message();
  EXPECT_LE(test::max_abs_diff(run_logits(*wide, ids), no_window), 1e-6);
}

// Phi-4-mini style: phi3 with partial_rotary_factor 0.75, longrope (extended
// context 1024 over the original 256, so attention factor sqrt(1 + ln 4 / ln 256))
// and tied embeddings, against the naive forward (RMSNorm, fused rows split).
TEST(Phi3, PartialRotaryLongRopeTiedMatchesNaiveForward) {
  const std::vector<double> short_f = {1.0, 1.25, 1.5, 2.0, 4.0, 8.0}, long_f = {1.0, 2.0, 4.0, 8.0, 16.0, 32.0};
  json c = fixture_config("phi3");
  c["partial_rotary_factor"] = 0.75;  // 12 of head_dim 16
  c["max_position_embeddings"] = 1024;
  c["tie_word_embeddings"] = true;
  c["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_f}, {"long_factor", long_f}};
  Tensors w = fixture_tensors("phi3");
  w.erase("lm_head.weight");
  Tensors naive;
  for (const auto& entry : w) {
    // Named references, not structured bindings: clang 14 cannot capture those.
    const std::string& n = entry.first;
    const Tensor& t = entry.second;
    auto split = [&](const std::string& from, const std::vector<std::pair<std::string, int64_t>>& parts) {
      const auto p = n.find(from);
      if (p == std::string::npos) return false;
      int64_t row = 0;
      const int64_t cols = t.shape[1];
      for (const auto& [to, rows] : parts) {
        naive[n.substr(0, p) + to + ".weight"] =
            Tensor{{rows, cols}, std::vector<float>(t.data.begin() + row * cols, t.data.begin() + (row + rows) * cols)};
        row += rows;
      }
      return true;
    };
    if (!split("self_attn.qkv_proj", {{"self_attn.q_proj", 96}, {"self_attn.k_proj", 32}, {"self_attn.v_proj", 32}}) &&
        !split("mlp.gate_up_proj", {{"mlp.gate_proj", 192}, {"mlp.up_proj", 192}})) {
      naive[n] = t;
    }
  }
  const auto ids = fixture_ids("phi3");
  NaiveDecoder ref{naive, 96, 6, 2, 16, 12, 2, 320, 1e-5, 10000.0, true, std::nullopt, "model.embed_tokens.weight",
                   true, {}, std::sqrt(1 + std::log(4.0) / std::log(256.0))};
  for (auto [max_seq_len, factors] : {std::pair{int64_t{256}, short_f}, std::pair{int64_t{512}, long_f}}) {
    auto pte = export_dir(write_checkpoint("phi4-mini-" + std::to_string(max_seq_len), c, w), max_seq_len);
    ASSERT_TRUE(pte.is_ok()) << pte.status().message();
    ref.rope_divisors = factors;
    const auto got = run_logits(*pte, ids);
    const double diff = test::max_abs_diff(got, ref.forward(ids));
    EXPECT_LE(diff, kLogitsAtol) << max_seq_len;
    RecordProperty("max_abs_logit_diff_" + std::to_string(max_seq_len), diff_text(diff));
    // Controls: the naive forward without the attention factor, or with full rotary, is far off.
    NaiveDecoder unscaled = ref;
    unscaled.attention_factor = 1.0;
    EXPECT_GT(test::max_abs_diff(got, unscaled.forward(ids)), kControlMin);
    NaiveDecoder full_rotary = ref;
    full_rotary.rotary_dim = 16;
    full_rotary.rope_divisors.resize(8, 1.0);
    EXPECT_GT(test::max_abs_diff(got, full_rotary.forward(ids)), kControlMin);
  }
}

// ---- Llama 3.2 / SmolLM2 / Qwen2.5 (tied llama / qwen2 rows) -------------------------

// The small Llama 3.2, SmolLM2 and Qwen2.5 checkpoints tie the output
// projection to the embeddings and ship no lm_head: such a checkpoint must
// equal the untied one whose lm_head is a copy of the embeddings, and (the
// llama3-rope and qwen2 fixtures being tied) the reference.
TEST(TiedFamilies, TiedCheckpointEqualsExplicitCopy) {
  for (const char* name : {"llama3-rope", "qwen2"}) {
    Tensors untied = fixture_tensors(name);
    untied["lm_head.weight"] = untied["model.embed_tokens.weight"];
    Tensors tied = untied;
    tied.erase("lm_head.weight");
    json c = fixture_config(name);
    c["tie_word_embeddings"] = true;
    auto a = export_dir(write_checkpoint(std::string(name) + "-tied", c, tied));
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    c["tie_word_embeddings"] = false;
    auto b = export_dir(write_checkpoint(std::string(name) + "-copy", c, untied));
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    const auto ids = fixture_ids(name);
    const auto tied_logits = run_logits(*a, ids);
    EXPECT_LE(test::max_abs_diff(tied_logits, run_logits(*b, ids)), 1e-6) << name;
    // Both fixtures are tied checkpoints themselves (Llama 3.x RoPE + tied = Llama 3.2 1B's layout).
    EXPECT_LE(test::max_abs_diff(tied_logits, fixture_logits(name)), kLogitsAtol) << name;
    // Untied without lm_head is a missing tensor, named.
    auto missing = export_dir(write_checkpoint(std::string(name) + "-missing", c, tied));
    ASSERT_FALSE(missing.is_ok());
    EXPECT_NE(missing.status().message().find("lm_head.weight"), std::string::npos) << missing.status().message();
  }
}

// ---- The table ------------------------------------------------------------------

TEST(ArchitectureList, EveryRowHasAStatus) {
  size_t property = 0;
  for (const auto& a : models::all_architectures()) {
    const auto s = models::arch_status_name(a.status);
    EXPECT_FALSE(s.empty());
    property += a.status == models::ArchStatus::kProperty;
  }
  for (auto t : {"granite", "smollm3", "stablelm", "starcoder2", "qwen2_moe"}) {
    const auto* a = models::find_architecture(t);
    ASSERT_NE(a, nullptr) << t;
    EXPECT_EQ(a->status, models::ArchStatus::kProperty) << t;
  }
  EXPECT_EQ(models::find_architecture("llama")->status, models::ArchStatus::kReference);
  EXPECT_GE(property, 5u);
}

}  // namespace
}  // namespace hf2pte
