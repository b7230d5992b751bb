// `--backend xnnpack` end to end: the Llama-family fixtures exported with
// XNNPACK delegates (FullyConnected for every linear layer plus the
// elementwise/data-movement ops around them), run through our runtime with the
// XnnpackBackend registered: logits within 1e-4 of the fixture references,
// greedy ids exact through the KV cache, and file-level facts (delegates,
// named weights keyed by SHA-256, FullyConnected count = linear layers).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "backends/xnnpack/export/sha256.h"
#include "backends/xnnpack/runtime/xnn_payload.h"
#include "runtime/weight_store.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/portable/kernels.h"
#include "llm/generator.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "decode_check.h"
#include "test_util.h"

namespace hf2pte {
namespace {

namespace fb = executorch_flatbuffer;
constexpr double kLogitsAtol = 1e-4;

std::string export_xnnpack(const std::string& dir, const std::string& name,
                           ScalarType linear_weights = ScalarType::kFloat) {
  exp::ExportRequest req;
  req.model_dir = dir;
  req.output_path = test::temp_dir(name + (linear_weights == ScalarType::kHalf ? "-xnnpack-f16" : "-xnnpack")) + "/model.pte";
  req.config.backend = exp::Backend::kXnnpack;
  req.config.linear_weights = linear_weights;
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

std::string diff_text(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", d);
  return buf;
}

/// Linear layers of a Llama-family decoder: q, k, v, o, gate, up, down per layer, + lm_head.
int64_t linear_layers(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  auto c = nlohmann::json::parse(in);
  return c["num_hidden_layers"].get<int64_t>() * 7 + 1;
}

class XnnpackExport : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok()); }
};
class XnnpackExportFacts : public XnnpackExport {};

TEST_P(XnnpackExportFacts, DelegatesHoldEveryLinearLayer) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + GetParam());
  auto path = export_xnnpack(dir, GetParam());
  auto file = pte::PteFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const fb::Program& p = (*file)->program();
  const fb::ExecutionPlan* forward = nullptr;
  for (const auto* ep : *p.execution_plan()) if (ep->name()->str() == "forward") forward = ep;
  ASSERT_NE(forward, nullptr);
  ASSERT_NE(forward->delegates(), nullptr);
  ASSERT_GT(forward->delegates()->size(), 0u);
  std::map<std::string, size_t> counts;
  for (const auto* d : *forward->delegates()) {
    EXPECT_EQ(d->id()->str(), "XnnpackBackend");
    EXPECT_EQ(d->processed()->location(), fb::DataLocation::SEGMENT);
    EXPECT_TRUE(d->compile_specs() == nullptr || d->compile_specs()->size() == 0);
    auto payload = (*file)->delegate_data(*d->processed());
    ASSERT_TRUE(payload.is_ok()) << payload.status().message();
    auto c = xnn::xnnpack_node_counts(*payload, file->get());
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    for (const auto& [k, n] : *c) counts[k] += n;
  }
  EXPECT_EQ(int64_t(counts["XNNFullyConnected"]), linear_layers(dir)) << GetParam();
  // No mm/addmm KernelCall is left: every linear layer went to XNNPACK.
  for (const auto* op : *forward->operators()) {
    EXPECT_NE(op->name()->str(), "aten::mm") << GetParam();
    EXPECT_NE(op->name()->str(), "aten::addmm") << GetParam();
  }
  // Weights are named data keyed by the SHA-256 of their bytes.
  ASSERT_NE(p.named_data(), nullptr);
  int weights = 0;
  for (const auto* nd : *p.named_data()) {
    if (nd->key()->str().rfind("tokenizer/", 0) == 0) continue;
    auto bytes = (*file)->named_data(nd->key()->str());
    ASSERT_TRUE(bytes.is_ok());
    EXPECT_EQ(xnn::sha256_hex(bytes->data(), bytes->size()), nd->key()->str());
    ++weights;
  }
  EXPECT_GT(weights, 0);
  for (const auto& [k, n] : counts) RecordProperty(k, std::to_string(n));
}

TEST_P(XnnpackExport, FullSequenceLogitsMatchReference) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + GetParam());
  double diff = test::expect_full_sequence_logits(dir, export_xnnpack(dir, GetParam()), portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_logit_diff", diff_text(diff));
}

TEST_P(XnnpackExport, KvCacheDecodeReproducesGreedy) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + GetParam());
  double worst = test::expect_decode_reproduces_greedy(dir, export_xnnpack(dir, GetParam()), portable_registry(), kLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", diff_text(worst));
}

// --linear-weights fp16: every FullyConnected filter is an fp16 constant
// (half the named-data bytes of fp32) and the logits stay within fp16 weight
// rounding of the fixture references (worst measured: 6.2e-3), greedy ids
// through the KV cache exact.
constexpr double kFp16WeightsLogitsAtol = 2e-2;

class XnnpackExportFp16Weights : public XnnpackExport {};

TEST_P(XnnpackExportFp16Weights, FiltersAreFp16AndLogitsStayNearReference) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + GetParam());
  const std::string path = export_xnnpack(dir, GetParam(), ScalarType::kHalf);
  auto file = pte::PteFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const fb::ExecutionPlan* forward = (*file)->program().execution_plan()->Get(0);
  int fp16_filters = 0, fc = 0;
  for (const auto* d : *forward->delegates()) {
    auto payload = (*file)->delegate_data(*d->processed());
    ASSERT_TRUE(payload.is_ok());
    auto v = xnn::verify_payload(*payload);
    ASSERT_TRUE(v.is_ok()) << v.status().message();
    for (const auto* n : *v->graph->xnodes()) {
      const auto* f = n->xnode_union_as_XNNFullyConnected();
      if (f == nullptr) continue;
      ++fc;
      const auto* w = v->graph->xvalues()->Get(f->filter_id())->xvalue_union_as_XNNTensorValue();
      fp16_filters += w->datatype() == fb_xnnpack::XNNDatatype::fp16;
    }
  }
  EXPECT_EQ(fc, linear_layers(dir));
  EXPECT_EQ(fp16_filters, fc);
  double diff = test::expect_full_sequence_logits(dir, path, portable_registry(), kFp16WeightsLogitsAtol);
  RecordProperty("max_abs_logit_diff", diff_text(diff));
  std::printf("[ fp16 weights ] %s: max |logit - reference| %s\n", GetParam().c_str(), diff_text(diff).c_str());
  double worst = test::expect_decode_reproduces_greedy(dir, path, portable_registry(), kFp16WeightsLogitsAtol);
  RecordProperty("max_abs_step_logit_diff", diff_text(worst));
}

// --huge-pages (WeightPlacement::kHugePages): every fp32 / fp16 filter is
// copied into huge-page memory at init; the copies must compute what the
// mapped file does, against the fixtures' references.
TEST_P(XnnpackExportFp16Weights, HugePageWeightsMatchReference) {
  const std::string dir = test::repo_path("tests/data/fixtures/" + GetParam());
  const std::string fp32 = export_xnnpack(dir, GetParam()), fp16 = export_xnnpack(dir, GetParam(), ScalarType::kHalf);
  rt::set_weight_placement(rt::WeightPlacement::kHugePages);
  const double diff = test::expect_full_sequence_logits(dir, fp32, portable_registry(), kLogitsAtol);
  const double worst = test::expect_decode_reproduces_greedy(dir, fp32, portable_registry(), kLogitsAtol);
  const double diff16 = test::expect_full_sequence_logits(dir, fp16, portable_registry(), kFp16WeightsLogitsAtol);
  rt::set_weight_placement(rt::WeightPlacement::kInPlace);
  RecordProperty("max_abs_logit_diff", diff_text(std::max({diff, worst})));
  RecordProperty("max_abs_logit_diff_fp16", diff_text(diff16));
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (auto& c : n) if (c == '-') c = '_';
  return n;
}

// File-level facts on the Llama-family cases (7 linear layers per layer + lm_head).
INSTANTIATE_TEST_SUITE_P(Llama, XnnpackExportFacts, ::testing::Values("llama-mha", "llama-gqa", "qwen2", "phi3"), case_name);
INSTANTIATE_TEST_SUITE_P(Llama, XnnpackExportFp16Weights,
                         ::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "qwen2", "phi3"), case_name);
// Accuracy on every fixture of tests/e2e_fixtures_test.cpp.
INSTANTIATE_TEST_SUITE_P(Fixtures, XnnpackExport,
                         ::testing::Values("llama-mha", "llama-gqa", "llama-gqa-tied-bf16", "mistral", "qwen2", "phi3",
                                           "llama3-rope", "qwen3", "gemma", "olmo2", "gemma2", "gemma3", "phi",
                                           "gpt_neox", "mixtral", "qwen3_moe", "gpt2", "gpt2-hubstyle", "gpt_oss",
                                           "deepseek_v3", "mamba"),
                         case_name);

}  // namespace
}  // namespace hf2pte
