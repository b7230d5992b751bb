// The AVX-512 BF16 GEMM block (bf16_gemm.h) against a double reference, and
// its promise that a column split (how the pool divides the work) does not
// change a single bit. Skips on CPUs without AVX-512 BF16.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/half.h"
#include "kernels/optimized/bf16_gemm.h"

namespace hf2pte::kernels {
namespace {

struct Operands {
  int64_t M, N, K, lda, ldb, ldo;
  std::vector<uint16_t> a, b;
  std::vector<float> bias;
};

Operands random_operands(int64_t M, int64_t N, int64_t K, int64_t pad, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Operands o{M, N, K, K + pad, N + pad, N + pad, {}, {}, {}};
  o.a.resize(size_t(M * o.lda));
  o.b.resize(size_t(K * o.ldb));
  o.bias.resize(size_t(N));
  for (auto& x : o.a) x = float_to_bf16(dist(gen));
  for (auto& x : o.b) x = float_to_bf16(dist(gen));
  for (auto& x : o.bias) x = dist(gen);
  return o;
}

TEST(Bf16Gemm, MatchesDoubleReference) {
  const GemmBf16Fn kernel = gemm_bf16_kernel();
  if (kernel == nullptr) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  struct Shape {
    int64_t M, N, K, pad;
  };
  // Row tails (13, 20 = 8 + 8 + 4), column tails (77, 100, 5), K across blocks
  // of 256 (518) and K = 2, padded row strides.
  const Shape shapes[] = {{1, 16, 2, 0}, {13, 77, 518, 3}, {8, 32, 256, 0}, {20, 100, 64, 7}, {3, 5, 1024, 1}};
  for (const Shape& s : shapes) {
    for (bool with_bias : {false, true}) {
      const Operands o = random_operands(s.M, s.N, s.K, s.pad, 11);
      const uint16_t kUntouched = 0x7FC1;  // a NaN no product makes
      std::vector<uint16_t> out(size_t(s.M * o.ldo), kUntouched);
      kernel(s.M, s.N, s.K, o.a.data(), o.lda, o.b.data(), o.ldb, with_bias ? o.bias.data() : nullptr, out.data(),
             o.ldo);
      for (int64_t m = 0; m < s.M; ++m) {
        for (int64_t n = 0; n < o.ldo; ++n) {
          const uint16_t got = out[size_t(m * o.ldo + n)];
          if (n >= s.N) {
            ASSERT_EQ(got, kUntouched) << "wrote past column " << s.N;
            continue;
          }
          double want = with_bias ? o.bias[size_t(n)] : 0.0;
          for (int64_t k = 0; k < s.K; ++k) {
            want += double(bf16_to_float(o.a[size_t(m * o.lda + k)])) *
                    double(bf16_to_float(o.b[size_t(k * o.ldb + n)]));
          }
          // One rounding to bf16 (half an ulp: up to 2^-8 relative) after an f32 sum.
          ASSERT_NEAR(bf16_to_float(got), want, std::abs(want) / 256 + 2e-5 * std::sqrt(double(s.K)))
              << "M " << s.M << " N " << s.N << " K " << s.K << " bias " << with_bias << " at " << m << "," << n;
        }
      }
    }
  }
}

TEST(Bf16Gemm, ColumnSplitsGiveIdenticalBits) {
  const GemmBf16Fn kernel = gemm_bf16_kernel();
  if (kernel == nullptr) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  const Operands o = random_operands(11, 150, 600, 0, 5);
  std::vector<uint16_t> whole(size_t(o.M * o.ldo));
  kernel(o.M, o.N, o.K, o.a.data(), o.lda, o.b.data(), o.ldb, o.bias.data(), whole.data(), o.ldo);
  for (int64_t split : {32, 64, 45, 1}) {
    std::vector<uint16_t> parts(whole.size());
    kernel(o.M, split, o.K, o.a.data(), o.lda, o.b.data(), o.ldb, o.bias.data(), parts.data(), o.ldo);
    kernel(o.M, o.N - split, o.K, o.a.data(), o.lda, o.b.data() + split, o.ldb, o.bias.data() + split,
           parts.data() + split, o.ldo);
    ASSERT_EQ(parts, whole) << "split at column " << split;
  }
}

TEST(Bf16Gemm, SwitchedOffMeansNoKernel) {
  if (gemm_bf16_kernel() == nullptr) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  gemm_bf16_enable(false);
  EXPECT_EQ(gemm_bf16_kernel(), nullptr);
  gemm_bf16_enable(true);
  EXPECT_NE(gemm_bf16_kernel(), nullptr);
}

}  // namespace
}  // namespace hf2pte::kernels
