// Whisper end to end against openai/whisper in float64 (tests/data/fixtures/whisper):
// the encoder's hidden states, the decoder's logits for a 6-token prefix, and
// greedy decoding from <|startoftranscript|> through the KV cache (ids exact,
// every step's logits within 1e-4), on the portable and XNNPACK backends; and
// as 16-bit programs (--dtype bf16 / fp16, --backend cuda through its CPU
// reference executor) within the 16-bit bound of docs/decisions.md, relative to
// max(1, max |reference|), greedy ids equal wherever the reference's top-1/top-2
// margin exceeds twice that bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "export/validate.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "runtime/program.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kAtol = 1e-4;

std::string dir() { return test::repo_path("tests/data/fixtures/whisper"); }

struct Mode {
  const char* name;
  exp::Backend backend;
  ScalarType dtype;
  double tol;  ///< fp32: absolute; 16-bit: relative to max(1, max |reference|)
};
const Mode kModes[] = {{"portable", exp::Backend::kPortable, ScalarType::kFloat, kAtol},
                       {"xnnpack", exp::Backend::kXnnpack, ScalarType::kFloat, kAtol},
                       {"bf16", exp::Backend::kPortable, ScalarType::kBFloat16, exp::kBf16ModelTolerance},
                       {"fp16", exp::Backend::kPortable, ScalarType::kHalf, exp::kFp16ModelTolerance},
                       {"cuda", exp::Backend::kCuda, ScalarType::kBFloat16, exp::kBf16ModelTolerance},
                       {"fp16_xnnpack", exp::Backend::kXnnpack, ScalarType::kHalf, exp::kFp16ModelTolerance}};

/// The distance the mode's tolerance is stated in.
double distance(const Mode& m, const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 1;
  if (m.dtype != ScalarType::kFloat) {
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  }
  return test::max_abs_diff(got, want) / scale;
}

class WhisperFixture : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
    exp::ExportRequest req;
    req.config.backend = GetParam().backend;
    req.config.dtype = GetParam().dtype;
    req.model_dir = dir();
    req.output_path = test::temp_dir(std::string("whisper-") + GetParam().name) + "/model.pte";
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
  const Mode& m = GetParam();
  EXPECT_LE(distance(m, test::as_floats(states), test::as_floats(ref_states)), m.tol);

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
  const double d = distance(m, test::as_floats(*logits), test::as_floats(test::load_npy(dir() + "/logits.npy")));
  EXPECT_LE(d, m.tol);
  RecordProperty("max_abs_logit_diff", test::diff_text(d));
}

TEST_P(WhisperFixture, GreedyThroughTheCacheMatchesReference) {
  const HostTensor states = encode();
  auto dec = method("text_decoder");
  const auto greedy = test::as_longs(test::load_npy(dir() + "/greedy.npy"));
  const auto step_ref = test::as_floats(test::load_npy(dir() + "/greedy_step_logits.npy"));
  const int64_t V = 384;
  ASSERT_EQ(step_ref.size(), greedy.size() * size_t(V));
  const Mode& m = GetParam();
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
    const std::vector<float> want(step_ref.begin() + long(step) * V, step_ref.begin() + long(step + 1) * V);
    worst = std::max(worst, distance(m, row, want));
    token = int64_t(std::max_element(row.begin(), row.end()) - row.begin());
    // At 16 bits a near tie may go either way: ids are compared where the
    // reference's margin exceeds twice the bound; the reference id is fed on.
    std::vector<float> sorted = want;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    double scale = 1;
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
    if (m.dtype == ScalarType::kFloat || sorted[0] - sorted[1] > 2 * m.tol * scale) {
      EXPECT_EQ(token, greedy[step]) << "step " << step;
    }
    token = greedy[step];
  }
  EXPECT_LE(worst, m.tol);
  RecordProperty("max_abs_step_logit_diff", test::diff_text(worst));
}

INSTANTIATE_TEST_SUITE_P(Backends, WhisperFixture, ::testing::ValuesIn(kModes),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hf2pte
