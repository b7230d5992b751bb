// --dtype bf16 / fp16 and --backend cuda (issue 15, items 1-3): every decoder
// fixture exported as a 16-bit program (portable kernels, XNNPACK fp16 graphs,
// or one CUDA delegate run here by its CPU reference executor) matches its independent fp32/fp64 reference
// (tests/data/fixtures) within the 16-bit tolerance of docs/decisions.md
// ("Half-precision programs"):
//   |logit - reference| <= tol x max(1, max |reference logits|), tol 2e-2 (bf16), 5e-3 (fp16),
// and the argmax equals the reference's greedy id at every decode step whose
// reference top-1/top-2 margin exceeds twice that bound (a smaller margin is a
// tie at 16-bit precision). Decoding is teacher-forced with the reference ids,
// so every step compares the same context. Controls: the bound is tight enough
// that an fp32 program beats it by orders of magnitude and a 16-bit program
// with a wrong cast would miss it (the fp16 case is 4x tighter than bf16).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "backends/builtin/builtin.h"
#include "export/exporter.h"
#include "export/validate.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "decode_check.h"
#include "quant_case.h"
#include "test_util.h"

namespace hf2pte {
namespace {

struct HalfCase {
  ScalarType dtype;
  double tol;  // relative to max(1, max |reference logits|)
  exp::Backend backend = exp::Backend::kPortable;
};

/// Families whose layers route tokens to top-k experts (BuiltModel::routed_experts).
bool routes_experts(const std::string& name) {
  return name == "mixtral" || name == "qwen3_moe" || name == "gpt_oss" || name == "deepseek_v3";
}

/// Mamba's selective scan carries each token's rounding into the next state.
bool recurrent(const std::string& name) { return name == "mamba"; }

const char* dtype_flag(ScalarType t) { return t == ScalarType::kHalf ? "fp16" : "bf16"; }
std::string case_flag(const HalfCase& c) {
  if (c.backend == exp::Backend::kCuda) return "cuda";
  return std::string(dtype_flag(c.dtype)) + (c.backend == exp::Backend::kXnnpack ? "-xnnpack" : "");
}

std::string fixture(const std::string& name) { return test::repo_path("tests/data/fixtures/" + name); }

/// A tests/data/fixtures name, or a tests/data/fixtures-quant one: its
/// checkpoint, its references and the recipe it quantizes with.
struct Target {
  std::string checkpoint, references, family;
  std::optional<exp::QuantConfig> quant;
};
Target target_of(const std::string& name) {
  const std::string quant_dir = test::repo_path("tests/data/fixtures-quant/" + name);
  if (!std::filesystem::exists(quant_dir + "/recipe.json")) return {fixture(name), fixture(name), name, std::nullopt};
  const test::QuantCase c = test::parse_quant_case(name);
  return {fixture(c.preset), quant_dir, c.preset, c.quant};
}

Result<exp::ExportSummary> export_half(const std::string& name, ScalarType dtype, const std::string& out,
                                       exp::Backend backend = exp::Backend::kPortable) {
  const Target t = target_of(name);
  exp::ExportRequest req;
  req.model_dir = t.checkpoint;
  req.output_path = out;
  req.config.backend = backend;
  req.config.dtype = dtype;
  if (t.quant) req.config.quant = *t.quant;
  return exp::export_model(req);
}

/// max(1, max |v|): the scale the tolerance is relative to (the whole output,
/// as the export's validation measures it).
double scale_of(const std::vector<float>& v) {
  double m = 1;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

/// max |a - b| over n values.
double abs_diff(const float* a, const float* b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

/// The row's top-1 minus top-2.
double margin(const float* b, int64_t V) {
  double top1 = -INFINITY, top2 = -INFINITY;
  for (int64_t i = 0; i < V; ++i) {
    if (b[i] > top1) {
      top2 = top1;
      top1 = b[i];
    } else if (b[i] > top2) {
      top2 = b[i];
    }
  }
  return top1 - top2;
}

int64_t argmax(const float* a, int64_t V) { return int64_t(std::max_element(a, a + V) - a); }

class HalfFixture : public ::testing::TestWithParam<std::tuple<std::string, HalfCase>> {};

TEST_P(HalfFixture, MatchesReferenceWithinHalfTolerance) {
  const auto& [name, hc0] = GetParam();
  // Routed (MoE) families: twice the bound, because the routing weights' own
  // rounding multiplies every expert's output (measured: 1.5-2x the dense
  // families' error), and up to a quarter of the positions may be off by an
  // expert chosen the other way on a near tie (mixtral bf16: 2 of 10).
  const Target target = target_of(name);
  const bool moe = routes_experts(target.family);
  // Recurrent (Mamba): twice the bound, every position within it. Measured with
  // the scan, x_proj and dt_proj in f32 (HF keeps the scan in f32 too): bf16
  // 1.4x, fp16 1.05x the dense bound, from the 16-bit in_proj/conv/out_proj
  // whose rounding the recurrence accumulates over the sequence.
  const bool relaxed = moe || recurrent(target.family);
  // Dynamically quantized activations (8da...): a 16-bit rounding that crosses
  // an int8 rounding boundary moves that activation by a whole int8 step
  // (1/255 of its token's range, the bf16 unit's size), so these programs get
  // twice the bf16 bound at either dtype (measured: fp16 1.7-3.0e-2, bf16
  // 3.3-4.3e-2 against the fp32 recipe's references).
  const bool dynamic = target.quant && target.quant->qlinear.starts_with("8da");
  const double tol = dynamic ? 2 * exp::kBf16ModelTolerance : relaxed ? 2 * hc0.tol : hc0.tol;
  const HalfCase hc{hc0.dtype, tol, hc0.backend};
  const std::string dir = target.references;
  const std::string pte = test::temp_dir(name + "-" + case_flag(hc)) + "/model.pte";
  auto s = export_half(name, hc.dtype, pte, hc.backend);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  // The export's own validation compared it with the fp32 model (a failure for
  // dense models, a reported distance for routed and quantized ones).
  const auto& v0 = s->report["validation"]["forward"]["outputs"][0];
  EXPECT_TRUE(v0.contains("vs_float_model")) << s->report["validation"].dump();
  EXPECT_EQ(v0.contains("vs_float_model_tolerance"), !relaxed && !target.quant) << s->report["validation"].dump();

  // The program really is 16-bit: the KV cache and the weights.
  auto file = pte::PteFile::open(pte);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  pte::InspectOptions with_nodes;
  with_nodes.describe_delegate = backends::describe_payload;
  const std::string text = pte::inspect_text(**file, with_nodes);
  EXPECT_NE(text.find(std::string(scalar_type_name(hc.dtype)) + "["), std::string::npos) << text;
  if (hc.backend == exp::Backend::kCuda) {
    // As upstream's CudaPartitioner: the whole forward graph is one delegate.
    const auto j = pte::inspect_json(**file);
    ASSERT_EQ(j["methods"][0]["delegates"].size(), 1u) << text;
    EXPECT_EQ(j["methods"][0]["delegates"][0]["id"], "Hf2pteCudaBackend");
    EXPECT_TRUE(s->report["warnings"].empty()) << s->report["warnings"].dump();
  }
  if (hc.backend == exp::Backend::kXnnpack && hc.dtype == ScalarType::kHalf && !target.quant) {
    // An XNNPACK fp16 graph, as upstream writes fp16 models: the linear
    // layers are fp16 FullyConnected nodes (fp16 activations and filters).
    EXPECT_NE(text.find("XNNFullyConnected fp16 x fp16"), std::string::npos) << text;
  }
  if (hc.backend == exp::Backend::kXnnpack && target.quant) {
    // Quantized linears are delegated whatever the dtype: int8 per-token
    // activations or fp32 ones, int filters (docs/quantization.md, "16-bit programs").
    const bool dynamic = target.quant->qlinear.starts_with("8da");
    EXPECT_NE(text.find(dynamic ? "XNNFullyConnected qdint8 x q" : "XNNFullyConnected fp32 x q"), std::string::npos) << text;
  }
  if (hc.backend == exp::Backend::kXnnpack && target.quant && hc.dtype == ScalarType::kHalf) {
    // fp16 <-> fp32 casts are Converts inside the delegates: forward is a few
    // delegates around the portable KV-cache writes, not one per linear.
    EXPECT_NE(text.find("XNNConvert"), std::string::npos) << text;
    EXPECT_EQ(text.find("_to_dim_order_copy"), std::string::npos) << text;
  }
  if (hc.backend == exp::Backend::kXnnpack && hc.dtype == ScalarType::kBFloat16) {
    // bf16 has no XNNPACK datatype: only the fp32 parts (norms, softmax,
    // routers) are delegated, with a warning.
    EXPECT_NE(s->report["warnings"].dump().find("no bf16 datatype"), std::string::npos) << s->report["warnings"].dump();
  }

  // Full sequence.
  auto ids = test::as_longs(test::load_npy(dir + "/input_ids.npy"));
  auto ref = test::load_npy(dir + "/logits.npy");
  const int64_t V = ref.sizes.back(), T = int64_t(ids.size());
  auto out = test::run_full_sequence(pte, ids, portable_registry());
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(out->dtype, ScalarType::kFloat);  // logits stay f32 (llm-contract.md)
  auto got = test::as_floats(*out);
  auto want = test::as_floats(ref);
  ASSERT_EQ(got.size(), want.size());
  const double scale = scale_of(want);
  if (dynamic) {
    // Control: the recipe moves these logits 4x the bound or more, so a
    // program computing the wrong recipe (or none) cannot pass it.
    auto fl = test::as_floats(test::load_npy(fixture(target.family) + "/logits.npy"));
    EXPECT_GT(abs_diff(fl.data(), want.data(), want.size()) / scale, 4 * hc.tol) << name;
  }
  double worst = 0;
  int within = 0;
  for (int64_t t = 0; t < T; ++t) {
    const double d = abs_diff(&got[size_t(t * V)], &want[size_t(t * V)], size_t(V)) / scale;
    worst = std::max(worst, d);
    within += d <= hc.tol;
  }
  RecordProperty("max_rel_logit_diff", test::diff_text(worst));
  RecordProperty("positions_within", within);
  if (!moe) {
    EXPECT_LE(worst, hc.tol) << name << " full sequence";
  } else {
    // A near tie between two experts' router logits may be decided the other
    // way at 16 bits, changing that position's logits wholesale (mixtral bf16:
    // 2 of 10 positions). Every other position must still be within tolerance.
    EXPECT_GE(within, T - T / 4) << name << ": " << T - within << " of " << T << " positions beyond " << hc.tol;
  }

  // Through the KV cache, teacher-forced with the reference's greedy ids, on
  // the optimized kernels (which fall back to the portable ones for 16-bit data).
  auto program = rt::Program::load(pte);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto gen = llm::TextGenerator::create(*program, optimized_registry());
  ASSERT_TRUE(gen.is_ok()) << gen.status().message();
  auto greedy = test::as_longs(test::load_npy(dir + "/greedy.npy"));
  auto steps = test::as_floats(test::load_npy(dir + "/greedy_step_logits.npy"));
  auto logits = (*gen)->forward(ids, 0);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  std::vector<float> last(logits->end() - V, logits->end());
  const double step_scale = scale_of(steps);
  double worst_step = 0;
  int decided = 0;
  int steps_within = 0;
  for (size_t k = 0; k < greedy.size(); ++k) {
    const float* r = &steps[k * size_t(V)];
    const double d = abs_diff(last.data(), r, size_t(V)) / step_scale;
    worst_step = std::max(worst_step, d);
    steps_within += d <= hc.tol;
    if (margin(r, V) > 2 * hc.tol * step_scale && (!moe || d <= hc.tol)) {
      EXPECT_EQ(argmax(last.data(), V), greedy[k]) << name << " step " << k;
      ++decided;
    }
    if (k + 1 == greedy.size()) break;
    auto step = (*gen)->forward({greedy[k]}, int64_t(ids.size() + k));
    ASSERT_TRUE(step.is_ok()) << step.status().message();
    last = *step;
  }
  const int n_steps = int(greedy.size());
  if (!moe) {
    EXPECT_LE(worst_step, hc.tol) << name << " decode";
  } else {
    EXPECT_GE(steps_within, n_steps - n_steps / 4) << name << ": decode steps beyond " << hc.tol;
  }
  RecordProperty("max_rel_step_diff", test::diff_text(worst_step));
  RecordProperty("greedy_steps_decided", decided);
}

const HalfCase kBf16{ScalarType::kBFloat16, exp::kBf16ModelTolerance};
const HalfCase kFp16{ScalarType::kHalf, exp::kFp16ModelTolerance};
const HalfCase kCuda{ScalarType::kBFloat16, exp::kBf16ModelTolerance, exp::Backend::kCuda};
const HalfCase kFp16Xnnpack{ScalarType::kHalf, exp::kFp16ModelTolerance, exp::Backend::kXnnpack};
const HalfCase kBf16Xnnpack{ScalarType::kBFloat16, exp::kBf16ModelTolerance, exp::Backend::kXnnpack};

auto half_case_name = [](const auto& info) {
  std::string n = std::get<0>(info.param) + "_" + case_flag(std::get<1>(info.param));
  for (auto& c : n) if (c == '-') c = '_';
  return n;
};

INSTANTIATE_TEST_SUITE_P(Fixtures, HalfFixture,
                         ::testing::Combine(::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "mistral",
                                                              "qwen2", "phi3", "llama3-rope", "qwen3", "gemma", "olmo2",
                                                              "gemma2", "gemma3", "phi", "gpt_neox", "mixtral",
                                                              "qwen3_moe", "gpt2", "gpt2-hubstyle", "gpt_oss",
                                                              "deepseek_v3", "mamba"),
                                            ::testing::Values(kBf16, kFp16, kCuda, kFp16Xnnpack)),
                         half_case_name);
// bf16 with --backend xnnpack delegates only the f32 parts (the bf16 ops are
// the portable ones tested above): a dense, a routed and a recurrent family.
INSTANTIATE_TEST_SUITE_P(Bf16Xnnpack, HalfFixture,
                         ::testing::Combine(::testing::Values("llama-gqa", "mixtral", "mamba"),
                                            ::testing::Values(kBf16Xnnpack)),
                         half_case_name);

// Quantized 16-bit programs (issue 13 x 15): the fixtures-quant references
// (torchao's formulas in fp32/fp64 on the same checkpoints) within the same
// 16-bit bounds. The linears run the recipe in fp32 between casts; the rest
// of the program, the KV cache included, is 16-bit.
INSTANTIATE_TEST_SUITE_P(Quantized, HalfFixture,
                         ::testing::Combine(::testing::Values("llama-gqa-8da4w-g32-emb8w-hqq", "gemma2-8da4w-g32-emb8w-hqq",
                                                              "qwen3-8da4w-g32-emb8w-hqq", "llama-gqa-8da8w-affine",
                                                              "qwen3-8da8w-affine", "gemma2-4w-g32-affine",
                                                              "llama-gqa-8w-hqq"),
                                            ::testing::Values(kBf16, kFp16, kCuda)),
                         half_case_name);
// XNNPACK's stored forms (fixtures-quant README): qbint4 with bf16 scales,
// per-channel qcint8.
INSTANTIATE_TEST_SUITE_P(QuantizedXnnpack, HalfFixture,
                         ::testing::Combine(::testing::Values("llama-gqa-8da4w-g32-bf16scales-hqq",
                                                              "gemma2-8da4w-g32-bf16scales-affine",
                                                              "qwen3-8da8w-hqq", "llama-gqa-8w-affine"),
                                            ::testing::Values(kFp16Xnnpack, kBf16Xnnpack)),
                         half_case_name);

// The fp32 program of the same fixture is within 1e-4 absolute (e2e_fixtures_test),
// far inside the 16-bit bound: the bound does not pass anything by being loose
// relative to what precision changes. And the 16-bit program is measurably
// different from the fp32 one (the dtype really changed the arithmetic).
TEST(HalfPrecision, Bf16DiffersFromFp32ButWithinBound) {
  const std::string name = "llama-gqa";
  const std::string dir = fixture(name);
  const std::string pte = test::temp_dir("half-control") + "/model.pte";
  ASSERT_TRUE(export_half(name, ScalarType::kBFloat16, pte).is_ok());
  auto ids = test::as_longs(test::load_npy(dir + "/input_ids.npy"));
  auto out = test::run_full_sequence(pte, ids, portable_registry());
  ASSERT_TRUE(out.has_value());
  const double diff = test::max_abs_diff(test::as_floats(*out), test::as_floats(test::load_npy(dir + "/logits.npy")));
  EXPECT_GT(diff, 1e-3) << "a bf16 program should not match fp32 to 1e-3";
}

// Refusals: --linear-weights fp16 applies to fp32 programs only.
// (16-bit encoders, image models and Whisper: encoder_test, vision_test, speech_test.)
TEST(HalfPrecision, UnsupportedCombinationsAreNamedErrors) {
  exp::ExportRequest req;
  req.model_dir = fixture("llama-gqa");
  req.output_path = test::temp_dir("half-refuse") + "/model.pte";
  req.config.backend = exp::Backend::kXnnpack;
  req.config.dtype = ScalarType::kBFloat16;
  req.config.linear_weights = ScalarType::kHalf;
  auto s = exp::export_model(req);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("--linear-weights"), std::string::npos) << s.status().message();
  EXPECT_FALSE(std::filesystem::exists(req.output_path));
}

}  // namespace
}  // namespace hf2pte
