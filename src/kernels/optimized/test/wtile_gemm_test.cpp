// The FullyConnected-shaped GEMMs of gemm.h at the row counts that run the
// tile kernels (16..256 rows, where the CPU has them) and just outside them
// (sgemm blocks): every weight layout and type (float [N,K] and [K,N],
// fp16 [N,K], fp16 / bf16 [K,N]) against a double reference, with and without
// a bias, over an output full of NaN; N and M not multiples of the tile (12
// columns, 32 rows). Each result is also computed on 1 and 3 threads and
// must be the same bits.
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/half.h"
#include "kernels/optimized/gemm.h"
#include "kernels/optimized/thread_pool.h"

namespace hf2pte::kernels {
namespace {

struct Shape {
  int64_t M, N, K;
};
// 16 and 256 are the tile kernels' bounds; 15 and 257 go to sgemm. K = 1100
// chains three K blocks of the k-major kernel, N = 150 two column blocks.
const Shape kShapes[] = {{16, 12, 1},   {45, 29, 67},       {15, 40, 33},    {256, 13, 130},
                         {257, 25, 20}, {33, 256 + 5, 300}, {40, 150, 1100}, {20, 7, 0}};

/// The weights' layout and type; `w(n, k)` is the value the product uses.
enum class Form { kF32Nk, kF32Kn, kF16Nk, kF16Kn, kBf16Kn };

struct Weights {
  std::vector<float> f32;
  std::vector<uint16_t> h16;
  std::vector<float> exact;  // [N, K]: what each stored weight means
};

Weights make_weights(Form form, int64_t N, int64_t K, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Weights w;
  w.exact.resize(size_t(N * K));
  const bool kn = form == Form::kF32Kn || form == Form::kF16Kn || form == Form::kBf16Kn;
  const bool f32 = form == Form::kF32Nk || form == Form::kF32Kn;
  if (f32) {
    w.f32.resize(size_t(N * K));
  } else {
    w.h16.resize(size_t(N * K));
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const size_t at = size_t(kn ? k * N + n : n * K + k);
      float v = dist(rng);
      if (form == Form::kBf16Kn) {
        w.h16[at] = float_to_bf16(v), v = bf16_to_float(w.h16[at]);
      } else if (!f32) {
        w.h16[at] = float_to_half(v), v = half_to_float(w.h16[at]);
      } else {
        w.f32[at] = v;
      }
      w.exact[size_t(n * K + k)] = v;
    }
  }
  return w;
}

void run(Form form, const Shape& s, const std::vector<float>& a, const Weights& w, const float* bias, float* c) {
  switch (form) {
    case Form::kF32Nk: return gemm_f32_nt(s.M, s.N, s.K, a.data(), w.f32.data(), c, bias);
    case Form::kF32Kn: return gemm_f32(s.M, s.N, s.K, 1.0f, a.data(), w.f32.data(), 0.0f, c, bias);
    case Form::kF16Nk: return gemm_f32_f16nt(s.M, s.N, s.K, a.data(), w.h16.data(), c, bias);
    case Form::kF16Kn: return gemm_f32_h16(ScalarType::kHalf, s.M, s.N, s.K, a.data(), w.h16.data(), c, bias);
    case Form::kBf16Kn: return gemm_f32_h16(ScalarType::kBFloat16, s.M, s.N, s.K, a.data(), w.h16.data(), c, bias);
  }
}

class FullyConnectedGemm : public ::testing::TestWithParam<Form> {
 protected:
  void TearDown() override { set_pool_threads(2); }
};

TEST_P(FullyConnectedGemm, MatchesDoubleReferenceOnAnyThreadCount) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : kShapes) {
    const Weights w = make_weights(GetParam(), s.N, s.K, rng);
    std::vector<float> a(size_t(s.M * s.K)), bias(size_t(s.N));
    for (auto& v : a) v = dist(rng);
    for (auto& v : bias) v = dist(rng);
    for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
      const std::string what = "M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " +
                               std::to_string(s.K) + (b != nullptr ? " with bias" : "");
      std::vector<float> c1(size_t(s.M * s.N), NAN), c3(c1);
      set_pool_threads(1);
      run(GetParam(), s, a, w, b, c1.data());
      set_pool_threads(3);
      run(GetParam(), s, a, w, b, c3.data());
      for (int64_t m = 0; m < s.M; ++m) {
        for (int64_t n = 0; n < s.N; ++n) {
          double want = b != nullptr ? b[n] : 0.0, mag = std::fabs(want);
          for (int64_t k = 0; k < s.K; ++k) {
            const double p = double(a[size_t(m * s.K + k)]) * w.exact[size_t(n * s.K + k)];
            want += p, mag += std::fabs(p);
          }
          ASSERT_NEAR(c1[size_t(m * s.N + n)], want, 1e-6 * mag + 1e-6) << what << " at " << m << "," << n;
        }
      }
      ASSERT_EQ(0, std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float))) << what << ": threads 1 vs 3";
    }
  }
}

std::string form_name(const ::testing::TestParamInfo<Form>& info) {
  static const char* const kNames[] = {"F32Nk", "F32Kn", "F16Nk", "F16Kn", "Bf16Kn"};
  return kNames[int(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Forms, FullyConnectedGemm,
                         ::testing::Values(Form::kF32Nk, Form::kF32Kn, Form::kF16Nk, Form::kF16Kn, Form::kBf16Kn),
                         form_name);

}  // namespace
}  // namespace hf2pte::kernels
