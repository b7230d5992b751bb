// Whisper end to end against openai/whisper in float64 (tests/data/fixtures/whisper):
// the encoder's hidden states, the decoder's logits for a 6-token prefix, and
// greedy decoding from <|startoftranscript|> through the KV cache (ids exact,
// every step's logits within 1e-4), on the portable and XNNPACK backends.
#include <gtest/gtest.h>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "runtime/program.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kAtol = 1e-4;

std::string dir() { return test::repo_path("tests/data/fixtures/whisper"); }

class WhisperFixture : public ::testing::TestWithParam<exp::Backend> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
    exp::ExportRequest req;
    req.config.backend = GetParam();
    req.model_dir = dir();
    req.output_path = test::temp_dir("whisper") + "/model.pte";
    auto s = exp::export_model(req);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    auto p = rt::Program::load(req.output_path);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    program_ = *p;
  }
  std::unique_ptr<rt::Method> method(const char* name) {
    auto m = program_->load_method(name, optimized_registry());
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return m.is_ok() ? std::move(*m) : nullptr;
  }
  HostTensor encode() {
    auto enc = method("encoder");
    EXPECT_TRUE(enc->set_input(0, test::load_npy(dir() + "/input_features.npy")).is_ok());
    EXPECT_TRUE(enc->execute().is_ok());
    return *enc->output_tensor(0);
  }
  std::shared_ptr<rt::Program> program_;
};

TEST_P(WhisperFixture, EncoderAndDecoderMatchReference) {
  const HostTensor states = encode();
  const HostTensor ref_states = test::load_npy(dir() + "/encoder_last_hidden_state.npy");
  EXPECT_EQ(states.sizes, ref_states.sizes);
  EXPECT_LE(test::max_abs_diff(test::as_floats(states), test::as_floats(ref_states)), kAtol);

  auto dec = method("text_decoder");
  const auto ids = test::as_longs(test::load_npy(dir() + "/decoder_input_ids.npy"));
  const int64_t S = int64_t(ids.size());
  std::vector<int64_t> positions(ids.size());
  for (int64_t i = 0; i < S; ++i) positions[size_t(i)] = i;
  ASSERT_TRUE(dec->set_input(0, HostTensor::from(ScalarType::kLong, {1, S}, ids)).is_ok());
  ASSERT_TRUE(dec->set_input(1, states).is_ok());
  ASSERT_TRUE(dec->set_input(2, HostTensor::from(ScalarType::kLong, {S}, positions)).is_ok());
  ASSERT_TRUE(dec->execute().is_ok());
  auto logits = dec->output_tensor(0);
  ASSERT_TRUE(logits.is_ok());
  const double d = test::max_abs_diff(test::as_floats(*logits), test::as_floats(test::load_npy(dir() + "/logits.npy")));
  EXPECT_LE(d, kAtol);
  RecordProperty("max_abs_logit_diff", test::diff_text(d));
}

TEST_P(WhisperFixture, GreedyThroughTheCacheMatchesReference) {
  const HostTensor states = encode();
  auto dec = method("text_decoder");
  const auto greedy = test::as_longs(test::load_npy(dir() + "/greedy.npy"));
  const auto step_ref = test::as_floats(test::load_npy(dir() + "/greedy_step_logits.npy"));
  const int64_t V = 384;
  ASSERT_EQ(step_ref.size(), greedy.size() * size_t(V));
  int64_t token = 380;  // <|startoftranscript|>, the prompt
  double worst = 0;
  for (size_t step = 0; step < greedy.size(); ++step) {
    // Inputs are set before every call (planned input memory is reused inside a call).
    ASSERT_TRUE(dec->set_input(0, HostTensor::from(ScalarType::kLong, {1, 1}, std::vector<int64_t>{token})).is_ok());
    ASSERT_TRUE(dec->set_input(1, states).is_ok());
    ASSERT_TRUE(dec->set_input(2, HostTensor::from(ScalarType::kLong, {1}, std::vector<int64_t>{int64_t(step)})).is_ok());
    ASSERT_TRUE(dec->execute().is_ok());
    auto logits = dec->output_tensor(0);
    ASSERT_TRUE(logits.is_ok());
    const auto row = test::as_floats(*logits);
    ASSERT_EQ(row.size(), size_t(V));
    worst = std::max(worst, test::max_abs_diff(row, std::vector<float>(step_ref.begin() + long(step) * V,
                                                                       step_ref.begin() + long(step + 1) * V)));
    token = int64_t(std::max_element(row.begin(), row.end()) - row.begin());
    EXPECT_EQ(token, greedy[step]) << "step " << step;
  }
  EXPECT_LE(worst, kAtol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(worst));
}

INSTANTIATE_TEST_SUITE_P(Backends, WhisperFixture, ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack),
                         [](const auto& info) { return info.param == exp::Backend::kPortable ? "portable" : "xnnpack"; });

}  // namespace
}  // namespace hf2pte
