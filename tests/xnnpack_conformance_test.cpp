// Upstream-written XNNPACK programs (ExecuTorch 1.3.1, tests/data/conformance)
// run through hf2pte's XnnpackBackend, checked against the outputs the
// upstream runtime printed (tests/data/conformance/README.md).
#include <gtest/gtest.h>

#include <cmath>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "kernels/portable/kernels.h"
#include "pte/inspect.h"
#include "runtime/program.h"
#include <cstring>

namespace hf2pte {
namespace {

// Local helpers rather than test_util: this suite needs only the runtime.
std::string conformance_path(const std::string& file) {
  return std::string(HF2PTE_SOURCE_DIR) + "/tests/data/conformance/" + file;
}

std::vector<float> as_floats(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

class XnnpackConformance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok()); }

  std::unique_ptr<rt::Method> load(const std::string& file) {
    auto program = rt::Program::load(conformance_path(file));
    EXPECT_TRUE(program.is_ok()) << program.status().message();
    if (!program.is_ok()) return nullptr;
    auto m = (*program)->load_method("forward", portable_registry());
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return m.is_ok() ? std::move(*m) : nullptr;
  }
};

TEST_F(XnnpackConformance, RegistrationIsIdempotent) {
  EXPECT_TRUE(xnn::register_xnnpack_backend().is_ok());
  EXPECT_NE(rt::find_backend("XnnpackBackend"), nullptr);
}

TEST_F(XnnpackConformance, AddOnes) {
  auto m = load("add.pte");
  ASSERT_NE(m, nullptr);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(m->set_input(i, HostTensor::from<float>(ScalarType::kFloat, {3}, {1, 1, 1})).is_ok());
  }
  auto st = m->execute();
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto out = m->output_tensor(0);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(as_floats(*out), (std::vector<float>{2, 2, 2}));
  // Non-trivial values, twice: the delegate must rebind inputs every call.
  ASSERT_TRUE(m->set_input(0, HostTensor::from<float>(ScalarType::kFloat, {3}, {1.5f, -2, 3})).is_ok());
  ASSERT_TRUE(m->set_input(1, HostTensor::from<float>(ScalarType::kFloat, {3}, {0.25f, 2, -10})).is_ok());
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(as_floats(*m->output_tensor(0)), (std::vector<float>{1.75f, 0, -7}));
}

TEST_F(XnnpackConformance, DynamicEveryLengthUpToTheBound) {
  auto m = load("dynamic.pte");
  ASSERT_NE(m, nullptr);
  for (int64_t n = 1; n <= 8; ++n) {
    std::vector<float> x(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[size_t(i)] = float(i) - 2.5f;
      want[size_t(i)] = x[size_t(i)] * 2.0f;
    }
    ASSERT_TRUE(m->set_input(0, HostTensor::from<float>(ScalarType::kFloat, {n}, x)).is_ok()) << n;
    auto st = m->execute();
    ASSERT_TRUE(st.is_ok()) << "n=" << n << ": " << st.message();
    auto out = m->output_tensor(0);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(out->sizes, (std::vector<int64_t>{n}));
    EXPECT_EQ(as_floats(*out), want) << "n=" << n;
  }
}

TEST_F(XnnpackConformance, DynamicRefusesBeyondTheBound) {
  auto m = load("dynamic.pte");
  ASSERT_NE(m, nullptr);
  auto st = m->set_input(0, HostTensor::from<float>(ScalarType::kFloat, {9}, std::vector<float>(9, 1.0f)));
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange) << st.message();
  EXPECT_NE(st.message().find("exceeds the planned bound"), std::string::npos) << st.message();
}

TEST_F(XnnpackConformance, QuantizedLinearOnes) {
  auto m = load("quantized.pte");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->set_input(0, HostTensor::from<float>(ScalarType::kFloat, {2, 8}, std::vector<float>(16, 1.0f))).is_ok());
  auto st = m->execute();
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto out = m->output_tensor(0);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->sizes, (std::vector<int64_t>{2, 8}));
  const std::vector<float> row = {0.648239f, -0.277817f, 0.108948f, 0.348633f,
                                  -0.125290f, -0.533844f, 0.855239f, 0.680923f};
  const std::vector<float> got = as_floats(*out);
  ASSERT_EQ(got.size(), 16u);
  // The README prints 6 decimals; the outputs are dequantized int8 values
  // (multiples of the 0.005447 output scale), so agreeing to 1e-5 means every
  // int8 code matches upstream exactly.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], row[i % 8], 1e-5) << "element " << i;
}

TEST_F(XnnpackConformance, InspectListsDelegateNodes) {
  auto file = pte::PteFile::open(conformance_path("quantized.pte"));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  pte::InspectOptions opts;
  opts.describe_delegate = [](std::string_view, std::span<const uint8_t> payload, const pte::PteFile& f) {
    return xnn::xnnpack_node_counts(payload, &f);
  };
  const auto j = pte::inspect_json(**file, opts);
  const auto& d = j["methods"][0]["delegates"][0];
  EXPECT_EQ(d["node_count"], 3);
  EXPECT_EQ(d["nodes"][0]["type"], "XNNConvert");
  EXPECT_EQ(d["nodes"][0]["count"], 2);
  EXPECT_EQ(d["nodes"][1]["type"], "XNNFullyConnected qint8 x qint8");  // quantized FCs name their scheme
  EXPECT_NE(pte::inspect_text(**file, opts).find("3 nodes (XNNConvert x2, XNNFullyConnected qint8 x qint8 x1)"), std::string::npos);
  // Without a describer the output is unchanged.
  EXPECT_FALSE(pte::inspect_json(**file)["methods"][0]["delegates"][0].contains("nodes"));
}

}  // namespace
}  // namespace hf2pte
