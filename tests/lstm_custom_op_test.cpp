// The custom-operator API end to end: an upstream-written program
// (tests/data/conformance/lstm/lstm.pte) calls `etnp::lstm.out`, which hf2pte
// does not ship; an application registers its own kernel in a KernelRegistry
// and the program reproduces the upstream output (lstm/out.bin).
// docs/custom-operators.md describes the API this test exercises.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "kernels/portable/kernels.h"
#include "runtime/kernel.h"
#include "runtime/program.h"

namespace hf2pte {
namespace {

constexpr int64_t kT = 5, kB = 2, kI = 4, kH = 3;  // lstm/shape

std::vector<float> read_floats(const std::string& relative) {
  std::ifstream f(std::string(HF2PTE_SOURCE_DIR) + "/tests/data/conformance/lstm/" + relative, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

/// `etnp::lstm.out` as lstm.pte calls it (args read from the file with
/// `flatc --json`): input [T,B,I], h0 [B,H], c0 [B,H], w_ih [4H,I], w_hh [4H,H],
/// b_ih [4H], b_hh [4H] (the last four baked constants), then the out tensors
/// output [T,B,H], h_n [B,H], c_n [B,H], then the return slot (a TensorList).
/// One layer, PyTorch gate order i, f, g, o.
Status lstm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  HF2PTE_CHECK_OR_RETURN(args.size() == 11, kInvalidProgram, "{}: expected 11 args, got {}", ctx.op_name,
                         args.size());
  std::vector<rt::Tensor*> t(10);
  static const char* kNames[] = {"input", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh", "output", "h_n", "c_n"};
  for (size_t i = 0; i < t.size(); ++i) {
    HF2PTE_ASSIGN_OR_RETURN(t[i], rt::arg_tensor(args[i], kNames[i]));
    HF2PTE_CHECK_OR_RETURN(t[i]->dtype() == ScalarType::kFloat, kInvalidArgument, "{}: {} must be f32",
                           ctx.op_name, kNames[i]);
  }
  const rt::Tensor& x = *t[0];
  HF2PTE_CHECK_OR_RETURN(x.dim() == 3, kInvalidArgument, "{}: input must be [T,B,I]", ctx.op_name);
  const int64_t T = x.size(0), B = x.size(1), I = x.size(2), H = t[1]->size(1);
  HF2PTE_CHECK_OR_RETURN(t[3]->numel() == 4 * H * I && t[4]->numel() == 4 * H * H && t[5]->numel() == 4 * H &&
                             t[6]->numel() == 4 * H && t[1]->numel() == B * H && t[2]->numel() == B * H,
                         kInvalidArgument, "{}: weight shapes do not match I={} H={}", ctx.op_name, I, H);
  const int64_t out_sizes[] = {T, B, H};
  HF2PTE_RETURN_IF_ERROR(t[7]->resize(out_sizes));
  const float *w_ih = t[3]->data<float>(), *w_hh = t[4]->data<float>();
  const float *b_ih = t[5]->data<float>(), *b_hh = t[6]->data<float>();
  std::vector<float> h(t[1]->data<float>(), t[1]->data<float>() + B * H);
  std::vector<float> c(t[2]->data<float>(), t[2]->data<float>() + B * H);
  std::vector<float> gates(size_t(4 * H));
  for (int64_t s = 0; s < T; ++s) {
    std::vector<float> h_next(h.size());
    for (int64_t b = 0; b < B; ++b) {
      const float* xt = x.data<float>() + (s * B + b) * I;
      for (int64_t g = 0; g < 4 * H; ++g) {
        float acc = b_ih[g] + b_hh[g];
        for (int64_t k = 0; k < I; ++k) acc += w_ih[g * I + k] * xt[k];
        for (int64_t k = 0; k < H; ++k) acc += w_hh[g * H + k] * h[size_t(b * H + k)];
        gates[size_t(g)] = acc;
      }
      for (int64_t j = 0; j < H; ++j) {
        const float ig = sigmoid(gates[size_t(j)]), fg = sigmoid(gates[size_t(H + j)]);
        const float gg = std::tanh(gates[size_t(2 * H + j)]), og = sigmoid(gates[size_t(3 * H + j)]);
        float& cell = c[size_t(b * H + j)];
        cell = fg * cell + ig * gg;
        h_next[size_t(b * H + j)] = og * std::tanh(cell);
      }
    }
    h = h_next;
    std::memcpy(t[7]->data<float>() + s * B * H, h.data(), h.size() * sizeof(float));
  }
  std::memcpy(t[8]->data<float>(), h.data(), h.size() * sizeof(float));
  std::memcpy(t[9]->data<float>(), c.data(), c.size() * sizeof(float));
  return Status::ok();
}

TEST(LstmCustomOp, ReproducesUpstreamOutput) {
  const std::vector<float> in = read_floats("in.bin");
  const std::vector<float> want = read_floats("out.bin");
  ASSERT_EQ(in.size(), size_t(kT * kB * kI + 2 * kB * kH));
  ASSERT_EQ(want.size(), size_t(kT * kB * kH));

  // The public API: copy the portable registry and add the custom kernel.
  rt::KernelRegistry registry = portable_registry();
  registry.register_kernel("etnp::lstm.out", lstm_out);

  auto program = rt::Program::load(std::string(HF2PTE_SOURCE_DIR) + "/tests/data/conformance/lstm/lstm.pte");
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto m = (*program)->load_method("forward", registry);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto slice = [&](size_t from, size_t n) { return std::vector<float>(in.begin() + long(from), in.begin() + long(from + n)); };
  ASSERT_TRUE((*m)->set_input(0, HostTensor::from<float>(ScalarType::kFloat, {kT, kB, kI}, slice(0, kT * kB * kI))).is_ok());
  ASSERT_TRUE((*m)->set_input(1, HostTensor::from<float>(ScalarType::kFloat, {kB, kH}, slice(kT * kB * kI, kB * kH))).is_ok());
  ASSERT_TRUE(
      (*m)->set_input(2, HostTensor::from<float>(ScalarType::kFloat, {kB, kH}, slice(kT * kB * kI + kB * kH, kB * kH)))
          .is_ok());
  auto st = (*m)->execute();
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto out = (*m)->output_tensor(0);
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(out->sizes, (std::vector<int64_t>{kT, kB, kH}));
  std::vector<float> got(size_t(out->numel()));
  std::memcpy(got.data(), out->bytes.data(), got.size() * sizeof(float));
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
  RecordProperty("max_abs_diff", fmt::format("{:.3g}", max_diff));
  EXPECT_LE(max_diff, 1e-5);
  // h_n is the last step of the output sequence.
  auto h_n = (*m)->output_tensor(1);
  ASSERT_TRUE(h_n.is_ok());
  std::vector<float> hn(size_t(kB * kH));
  std::memcpy(hn.data(), h_n->bytes.data(), hn.size() * sizeof(float));
  for (size_t i = 0; i < hn.size(); ++i) EXPECT_FLOAT_EQ(hn[i], got[size_t((kT - 1) * kB * kH) + i]);
}

TEST(LstmCustomOp, MissingKernelIsNamed) {
  auto program = rt::Program::load(std::string(HF2PTE_SOURCE_DIR) + "/tests/data/conformance/lstm/lstm.pte");
  ASSERT_TRUE(program.is_ok());
  auto m = (*program)->load_method("forward", portable_registry());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("etnp::lstm.out"), std::string::npos);
}

}  // namespace
}  // namespace hf2pte
