// What quantization costs on a real model: stories260K (models/, trained on
// TinyStories) with optimum-executorch's LLM recipe (8da4w, group 32, and
// --qembedding 8w) must still tell the fp32 model's story. Its MLP's down
// projection has 172 input features, which 32 does not divide, so the recipe
// is spelled --qlinear 8da4w,8da8w (8da8w per channel there; plain 8da4w is a
// named error, docs/quantization.md). The fp32 program's
// own greedy text (150 tokens after "Once upon a time") is scored by both
// programs and the mean per-token NLLs compared (bounds below).
#include <gtest/gtest.h>

#include <cmath>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "llm/generator.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr int kTokens = 150;
const std::vector<int64_t> kPrompt = {1, 403, 407, 261, 378};  // BOS + "Once upon a time" (models/stories260K/reference.json)

std::shared_ptr<rt::Program> export_and_load(const exp::QuantConfig& q, const std::string& tag,
                                             ScalarType dtype = ScalarType::kFloat) {
  exp::ExportRequest req;
  req.model_dir = test::repo_path("models/stories260K");
  req.config.quant = q;
  req.config.dtype = dtype;
  req.output_path = test::temp_dir("stories260K-" + tag) + "/model.pte";
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  auto p = rt::Program::load(req.output_path);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return p.is_ok() ? *p : nullptr;
}

/// Greedy continuation of `prompt` by `program` through the KV cache.
std::vector<int64_t> greedy(const std::shared_ptr<rt::Program>& program, const std::vector<int64_t>& prompt, int n) {
  auto gen = llm::TextGenerator::create(program, optimized_registry());
  EXPECT_TRUE(gen.is_ok()) << gen.status().message();
  if (!gen.is_ok()) return {};
  const int64_t V = (*gen)->vocab_size();
  std::vector<int64_t> ids = prompt;
  auto logits = (*gen)->forward(prompt, 0);
  for (int k = 0; k < n && logits.is_ok(); ++k) {
    const float* last = logits->data() + logits->size() - size_t(V);
    ids.push_back(int64_t(std::max_element(last, last + V) - last));
    logits = (*gen)->forward({ids.back()}, int64_t(ids.size() - 1));
  }
  EXPECT_TRUE(logits.is_ok()) << logits.status().message();
  return ids;
}

/// Mean -log p(ids[t + 1] | ids[0..t]) over the generated tokens (t + 1 >=
/// `first`), from one full-sequence forward.
double mean_nll(const std::shared_ptr<rt::Program>& program, const std::vector<int64_t>& ids, size_t first) {
  auto gen = llm::TextGenerator::create(program, optimized_registry());
  EXPECT_TRUE(gen.is_ok()) << gen.status().message();
  if (!gen.is_ok()) return INFINITY;
  auto logits = (*gen)->forward(std::vector<int64_t>(ids.begin(), ids.end() - 1), 0);
  EXPECT_TRUE(logits.is_ok()) << logits.status().message();
  if (!logits.is_ok()) return INFINITY;
  const int64_t V = (*gen)->vocab_size();
  double nll = 0;
  for (size_t t = first - 1; t + 1 < ids.size(); ++t) {
    const float* row = logits->data() + t * size_t(V);
    double mx = *std::max_element(row, row + V), sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    nll += -(double(row[ids[t + 1]]) - mx - std::log(sum));
  }
  return nll / double(ids.size() - first);
}

// Measured here (2026-12-01): fp32 0.4849 nats/token; 8da8w + emb8w 0.4863
// (1.003x); 8da4w,8da8w + emb8w 0.6053 (1.248x). The 4-bit cost is the recipe's,
// not the kernels': 4w g32 weight-only gives the same 1.248x on the portable
// backend with float32 scales, and tests/quant_fixtures_test.cpp matches
// torchao's integers at 1e-4; a 64-wide model has no redundancy to absorb
// 4-bit group-32 weights. So 8-bit must stay within 1.05x and 4-bit within
// 1.3x (a broken kernel or packing lands far above both).
struct QualityCase {
  const char* qlinear;
  double max_ratio;
};

TEST(QuantQuality, Stories260KStillTellsItsStory) {
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto fp32 = export_and_load({}, "fp32");
  ASSERT_TRUE(fp32);
  const auto text = greedy(fp32, kPrompt, kTokens);
  ASSERT_EQ(text.size(), kPrompt.size() + kTokens);
  const double nll_fp32 = mean_nll(fp32, text, kPrompt.size());
  EXPECT_GT(nll_fp32, 0.0);
  for (const QualityCase c : {QualityCase{"8da8w", 1.05}, QualityCase{"8da4w,8da8w", 1.3}}) {
    exp::QuantConfig q;
    q.qlinear = c.qlinear;
    q.qembedding = "8w";
    auto quantized = export_and_load(q, std::string(c.qlinear) == "8da8w" ? "8da8w" : "8da4w");
    ASSERT_TRUE(quantized);
    const double nll_q = mean_nll(quantized, text, kPrompt.size());
    RecordProperty(std::string("nll_") + c.qlinear, std::to_string(nll_q));
    std::printf("stories260K greedy text, mean NLL per token: fp32 %.4f, --qlinear %s --qembedding 8w %.4f (ratio %.4f)\n",
                nll_fp32, c.qlinear, nll_q, nll_q / nll_fp32);
    EXPECT_LE(nll_q, c.max_ratio * nll_fp32) << c.qlinear;
  }
}

// --dtype bf16 / fp16 (16-bit weights, activations and KV cache; f32 norms and
// logits) on the same text: within 1.05x of fp32 like the 8-bit recipe, and
// the same greedy story.
TEST(QuantQuality, Stories260KSixteenBitStillTellsItsStory) {
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto fp32 = export_and_load({}, "fp32-ref");
  ASSERT_TRUE(fp32);
  const auto text = greedy(fp32, kPrompt, kTokens);
  const double nll_fp32 = mean_nll(fp32, text, kPrompt.size());
  for (ScalarType dt : {ScalarType::kBFloat16, ScalarType::kHalf}) {
    const std::string name(scalar_type_name(dt));
    auto half = export_and_load({}, name, dt);
    ASSERT_TRUE(half);
    const double nll_h = mean_nll(half, text, kPrompt.size());
    RecordProperty("nll_" + name, std::to_string(nll_h));
    std::printf("stories260K greedy text, mean NLL per token: fp32 %.4f, --dtype %s %.4f (ratio %.4f)\n", nll_fp32,
                name.c_str(), nll_h, nll_h / nll_fp32);
    EXPECT_LE(nll_h, 1.05 * nll_fp32) << name;
    // The first 40 greedy tokens are the fp32 program's (the whole story drifts
    // only where two tokens are near-tied at 16 bits).
    const auto own = greedy(half, kPrompt, 40);
    EXPECT_EQ(std::vector<int64_t>(own.begin(), own.end()), std::vector<int64_t>(text.begin(), text.begin() + int64_t(own.size())))
        << name;
    // The 8-bit recipe in the 16-bit program (docs/quantization.md, "16-bit
    // programs"): still within 1.05x of fp32 on the same text.
    exp::QuantConfig q;
    q.qlinear = "8da8w";
    q.qembedding = "8w";
    auto quantized = export_and_load(q, name + "-8da8w", dt);
    ASSERT_TRUE(quantized);
    const double nll_q = mean_nll(quantized, text, kPrompt.size());
    RecordProperty("nll_" + name + "_8da8w", std::to_string(nll_q));
    std::printf("stories260K greedy text, mean NLL per token: fp32 %.4f, --dtype %s --qlinear 8da8w --qembedding 8w %.4f "
                "(ratio %.4f)\n", nll_fp32, name.c_str(), nll_q, nll_q / nll_fp32);
    EXPECT_LE(nll_q, 1.05 * nll_fp32) << name << " 8da8w";
  }
}

}  // namespace
}  // namespace hf2pte
