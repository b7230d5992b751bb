// Image classifiers end to end against independent references
// (tests/data/fixtures/vit, resnet-*: torchvision's VisionTransformer and
// ResNet in float64, cross-checked by timm): logits, hidden states (and
// ResNet's pooled output) within 1e-4 through the portable kernels, the
// optimized kernels and --backend xnnpack.
#include <gtest/gtest.h>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/exporter.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"
#include "runtime/program.h"
#include "test_util.h"

namespace hf2pte {
namespace {

constexpr double kAtol = 1e-4;  // fixtures README: tolerance_suggestion

std::string export_case(const std::string& name, exp::Backend backend) {
  exp::ExportRequest req;
  req.config.backend = backend;
  req.model_dir = test::repo_path("tests/data/fixtures/" + name);
  req.output_path = test::temp_dir(name) + "/model.pte";
  auto s = exp::export_model(req);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return req.output_path;
}

/// forward(pixel_values) -> every output, with its shape.
std::vector<HostTensor> run_image(const std::string& pte, const HostTensor& pixels, const rt::KernelRegistry& kernels) {
  std::vector<HostTensor> outs;
  EXPECT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto program = rt::Program::load(pte);
  EXPECT_TRUE(program.is_ok()) << program.status().message();
  if (!program.is_ok()) return outs;
  auto method = (*program)->load_method("forward", kernels);
  EXPECT_TRUE(method.is_ok()) << method.status().message();
  if (!method.is_ok()) return outs;
  EXPECT_TRUE((*method)->set_input(0, pixels).is_ok());
  auto st = (*method)->execute();
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st.is_ok()) return outs;
  for (size_t i = 0; i < (*method)->num_outputs(); ++i) {
    auto t = (*method)->output_tensor(i);
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    if (t.is_ok()) outs.push_back(*t);
  }
  return outs;
}

struct Case {
  const char* fixture;
  std::vector<const char*> outputs;  ///< reference .npy per program output, in order
};

class ImageFixture : public ::testing::TestWithParam<std::tuple<Case, exp::Backend, bool>> {};

TEST_P(ImageFixture, OutputsMatchReference) {
  const auto& [c, backend, optimized] = GetParam();
  const std::string dir = test::repo_path(std::string("tests/data/fixtures/") + c.fixture);
  const auto pte = export_case(c.fixture, backend);
  auto outs = run_image(pte, test::load_npy(dir + "/pixel_values.npy"), optimized ? optimized_registry() : portable_registry());
  ASSERT_EQ(outs.size(), c.outputs.size());
  double worst = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const HostTensor ref = test::load_npy(dir + "/" + c.outputs[i]);
    EXPECT_EQ(outs[i].sizes, ref.sizes) << c.outputs[i];
    const double d = test::max_abs_diff(test::as_floats(outs[i]), test::as_floats(ref));
    EXPECT_LE(d, kAtol) << c.outputs[i];
    worst = std::max(worst, d);
  }
  RecordProperty("max_abs_diff", test::diff_text(worst));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ImageFixture,
    ::testing::Combine(::testing::Values(Case{"vit", {"logits.npy", "last_hidden_state.npy"}},
                                         Case{"resnet-basic", {"logits.npy", "last_hidden_state.npy", "pooler_output.npy"}},
                                         Case{"resnet-bottleneck", {"logits.npy", "last_hidden_state.npy", "pooler_output.npy"}}),
                       ::testing::Values(exp::Backend::kPortable, exp::Backend::kXnnpack), ::testing::Bool()),
    [](const auto& info) {
      std::string n = std::get<0>(info.param).fixture;
      for (auto& ch : n) if (ch == '-') ch = '_';
      n += std::get<1>(info.param) == exp::Backend::kPortable ? "_portable" : "_xnnpack";
      return n + (std::get<2>(info.param) ? "_optimized" : "_reference_kernels");
    });

}  // namespace
}  // namespace hf2pte
