// Each ISA table of the SIMD loops against a double reference, at sizes that
// hit every tail (odd K, N not a multiple of 16, sub-ranges [n0, n1)).
#include <cmath>
#include <array>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/scalar_type.h"
#include "kernels/optimized/simd_kernels.h"

namespace hf2pte::kernels {
namespace {

std::vector<const SimdKernels*> tables() {
  int n = 0;
  const SimdKernels* const* t = simd_tables(&n);
  return {t, t + n};
}

std::vector<float> random(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

TEST(SimdKernels, GemvMatchesReference) {
  for (const auto* k : tables()) {
    for (auto [K, N, n0, n1] : std::vector<std::array<int64_t, 4>>{{1, 1, 0, 1}, {7, 33, 0, 33}, {64, 2100, 16, 2077}, {9, 4200, 0, 4200}}) {
      auto x = random(size_t(K), 1), w = random(size_t(K * N), 2), bias = random(size_t(N), 3);
      for (bool with_bias : {false, true}) {
        std::vector<float> y(size_t(N), 42.0f);
        k->gemv(x.data(), w.data(), with_bias ? bias.data() : nullptr, y.data(), K, N, n0, n1);
        for (int64_t n = 0; n < N; ++n) {
          if (n < n0 || n >= n1) {
            ASSERT_EQ(y[size_t(n)], 42.0f) << k->isa << " wrote outside [n0, n1)";
            continue;
          }
          double ref = with_bias ? bias[size_t(n)] : 0.0;
          for (int64_t i = 0; i < K; ++i) ref += double(x[size_t(i)]) * w[size_t(i * N + n)];
          ASSERT_NEAR(y[size_t(n)], ref, 1e-5 * (1 + K)) << k->isa << " K=" << K << " N=" << N << " n=" << n;
        }
      }
    }
  }
}

TEST(SimdKernels, GemvTransposedMatchesReference) {
  for (const auto* k : tables()) {
    for (auto [K, N] : std::vector<std::array<int64_t, 2>>{{1, 3}, {64, 37}, {100, 5}, {200, 7}, {1030, 3}}) {
      auto x = random(size_t(K), 4), w = random(size_t(K * N), 5);
      std::vector<float> y(static_cast<size_t>(N));
      k->gemv_t(x.data(), w.data(), y.data(), K, K, 0, N);
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0;
        for (int64_t i = 0; i < K; ++i) ref += double(x[size_t(i)]) * w[size_t(n * K + i)];
        ASSERT_NEAR(y[size_t(n)], ref, 1e-5 * (1 + K)) << k->isa;
      }
    }
  }
}

TEST(SimdKernels, SoftmaxRowMatchesReference) {
  for (const auto* k : tables()) {
    for (int64_t n : {1, 5, 16, 17, 100, 1024}) {
      auto x = random(size_t(n), 6);
      for (auto& v : x) v *= 30.0f;
      if (n > 3) x[2] = -INFINITY;  // a masked position
      std::vector<float> y(static_cast<size_t>(n));
      k->softmax_row(x.data(), y.data(), n);
      double m = -INFINITY, s = 0;
      for (float v : x) m = std::max(m, double(v));
      for (float v : x) s += std::exp(double(v) - m);
      for (int64_t i = 0; i < n; ++i) {
        double ref = std::exp(double(x[size_t(i)]) - m) / s;
        ASSERT_NEAR(y[size_t(i)], ref, 1e-6 + 1e-5 * ref) << k->isa << " n=" << n << " i=" << i;
      }
    }
    std::vector<float> nan_row{1.0f, NAN, 2.0f}, y(3);
    k->softmax_row(nan_row.data(), y.data(), 3);
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << k->isa;
  }
}

// Key counts hit every tail of the 16-key blocks (and the 8-key steps of p . V).
constexpr int64_t kNarrowKeys[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 100, 512};

TEST(SimdKernels, NarrowHeadDotsMatchReference) {
  for (const auto* k : tables()) {
    for (int64_t d : {8, 16}) {
      for (int64_t n : kNarrowKeys) {
        auto a = random(size_t(d), 7), b = random(size_t(n * d), 8);
        std::vector<float> c(size_t(n) + 1, 42.0f);
        ASSERT_TRUE(k->dot_rows_narrow(a.data(), b.data(), c.data(), d, n)) << k->isa;
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (int64_t t = 0; t < d; ++t) ref += double(a[size_t(t)]) * b[size_t(j * d + t)];
          ASSERT_NEAR(c[size_t(j)], ref, 1e-5 * d) << k->isa << " d=" << d << " n=" << n << " j=" << j;
        }
        ASSERT_EQ(c[size_t(n)], 42.0f) << k->isa << " wrote past n=" << n;
      }
    }
    float c = 0;
    EXPECT_FALSE(k->dot_rows_narrow(&c, &c, &c, 12, 1)) << k->isa << ": only head_dim 8 and 16";
  }
}

TEST(SimdKernels, NarrowHeadWeightedSumsMatchReference) {
  for (const auto* k : tables()) {
    for (int64_t d : {8, 16}) {
      for (int64_t rows : kNarrowKeys) {
        auto a = random(size_t(rows), 9), b = random(size_t(rows * d), 10);
        std::vector<float> c(size_t(d) + 1, 42.0f);
        ASSERT_TRUE(k->axpy_rows_narrow(a.data(), b.data(), c.data(), rows, d)) << k->isa;
        for (int64_t t = 0; t < d; ++t) {
          double ref = 0;
          for (int64_t j = 0; j < rows; ++j) ref += double(a[size_t(j)]) * b[size_t(j * d + t)];
          ASSERT_NEAR(c[size_t(t)], ref, 1e-5 * (1 + rows)) << k->isa << " d=" << d << " rows=" << rows << " t=" << t;
        }
        ASSERT_EQ(c[size_t(d)], 42.0f) << k->isa << " wrote past d=" << d;
      }
    }
    float c = 0;
    EXPECT_FALSE(k->axpy_rows_narrow(&c, &c, &c, 1, 32)) << k->isa << ": only head_dim 8 and 16";
  }
}

TEST(SimdKernels, SelectRowTakesSelfWhereTheConditionHolds) {
  for (const auto* k : tables()) {
    for (int64_t n : {1, 15, 16, 17, 100}) {
      auto s = random(size_t(n), 11);
      std::vector<uint8_t> bytes(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) bytes[size_t(i)] = (i * 7) % 3 == 0;
      std::vector<float> y(size_t(n) + 1, 42.0f);
      k->select_row(reinterpret_cast<const bool*>(bytes.data()), s.data(), -INFINITY, y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[size_t(i)], bytes[size_t(i)] ? s[size_t(i)] : -INFINITY) << k->isa << " n=" << n << " i=" << i;
      }
      ASSERT_EQ(y[size_t(n)], 42.0f) << k->isa << " wrote past n=" << n;
    }
  }
}

TEST(SimdKernels, SigmoidRowMatchesReference) {
  for (const auto* k : tables()) {
    for (int64_t n : {1, 15, 16, 17, 1000}) {
      auto x = random(size_t(n), 12);
      for (auto& v : x) v *= 40.0f;  // saturating tails on both sides
      if (n > 3) x[1] = 0.0f, x[2] = -INFINITY, x[3] = INFINITY;
      std::vector<float> y(size_t(n) + 1, 42.0f);
      k->sigmoid_row(x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = 1.0 / (1.0 + std::exp(-double(x[size_t(i)])));
        ASSERT_NEAR(y[size_t(i)], ref, 1e-6 * ref + 1e-30) << k->isa << " x=" << x[size_t(i)];
      }
      ASSERT_EQ(y[size_t(n)], 42.0f) << k->isa << " wrote past n=" << n;
    }
    float nan = NAN, y = 0;
    k->sigmoid_row(&nan, &y, 1);
    EXPECT_TRUE(std::isnan(y)) << k->isa;
  }
}

// The 16-bit GEMVs (decode of --dtype bf16 / fp16 programs) against a double
// sum over the exactly widened weights, odd widths for the column tails.
TEST(SimdKernels, SixteenBitGemvMatchesReference) {
  for (const auto* k : tables()) {
    for (bool bf16 : {true, false}) {
      for (auto [K, N] : std::vector<std::array<int64_t, 2>>{{1, 3}, {7, 37}, {64, 100}, {130, 2051}}) {
        auto x = random(size_t(K), 21), wf = random(size_t(K * N), 22), bias = random(size_t(N), 23);
        std::vector<uint16_t> w(wf.size());
        for (size_t i = 0; i < w.size(); ++i) w[i] = bf16 ? float_to_bf16(wf[i]) : float_to_half(wf[i]);
        auto wide = [&](uint16_t v) { return bf16 ? bf16_to_float(v) : half_to_float(v); };
        std::vector<float> y(size_t(N) + 1, 42.0f);
        (bf16 ? k->gemv_bf16 : k->gemv_f16)(x.data(), w.data(), bias.data(), y.data(), K, N, 1, N);
        EXPECT_EQ(y[0], 42.0f) << k->isa << " wrote before n0";
        EXPECT_EQ(y[size_t(N)], 42.0f) << k->isa << " wrote past n1";
        for (int64_t n = 1; n < N; ++n) {
          double ref = bias[size_t(n)];
          for (int64_t i = 0; i < K; ++i) ref += double(x[size_t(i)]) * wide(w[size_t(i * N + n)]);
          ASSERT_NEAR(y[size_t(n)], ref, 1e-5 * (1 + K)) << k->isa << (bf16 ? " bf16" : " f16") << " K=" << K << " n=" << n;
        }
      }
    }
  }
}

// Narrowing to half rounds to nearest even exactly as the scalar float_to_half
// does, on every table: ties, the subnormal range, overflow to infinity, signed
// zeros, NaN; tails of every length.
TEST(SimdKernels, FloatToHalfRowMatchesScalar) {
  std::vector<float> x = random(1037, 21);
  const float specials[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.0f, -70000.0f, 1e-8f, -3e-5f, 6.1e-5f,
                            1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 2049.0f, 2051.0f, INFINITY, -INFINITY, NAN};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 7] = specials[i];
  for (size_t i = 0; i < x.size(); i += 11) x[i] *= 1e4f;
  for (const auto* k : tables()) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(8), int64_t(15), int64_t(17), int64_t(x.size())}) {
      std::vector<uint16_t> y(size_t(n) + 1, 0xABCD);
      k->float_to_half_row(x.data(), y.data(), n);
      EXPECT_EQ(y.back(), 0xABCD) << k->isa << " wrote past n=" << n;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t want = float_to_half(x[size_t(i)]);
        if (std::isnan(x[size_t(i)])) {
          ASSERT_TRUE(std::isnan(half_to_float(y[size_t(i)]))) << k->isa << " i=" << i;
        } else {
          ASSERT_EQ(y[size_t(i)], want) << k->isa << " i=" << i << " x=" << x[size_t(i)];
        }
      }
    }
  }
}

// Narrowing to bf16: the same bits as float_to_bf16 on every table (ties to
// even, carries into the exponent, overflow to infinity, subnormals, NaN).
TEST(SimdKernels, FloatToBf16RowMatchesScalar) {
  std::vector<float> x = random(1037, 22);
  const float specials[] = {0.0f,     -0.0f,     1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.4e38f, -3.4e38f, 1e-40f,
                            -1e-39f,  1.9921875f, 1.99609375f,      INFINITY,          -INFINITY, NAN,    -NAN};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 7] = specials[i];
  for (const auto* k : tables()) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(15), int64_t(16), int64_t(17), int64_t(x.size())}) {
      std::vector<uint16_t> y(size_t(n) + 1, 0xABCD);
      k->float_to_bf16_row(x.data(), y.data(), n);
      EXPECT_EQ(y.back(), 0xABCD) << k->isa << " wrote past n=" << n;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[size_t(i)], float_to_bf16(x[size_t(i)])) << k->isa << " i=" << i << " x=" << x[size_t(i)];
      }
    }
  }
}

TEST(SimdKernels, HalfRowsMatchReference) {
  for (const auto* k : tables()) {
    for (auto [K, N] : std::vector<std::array<int64_t, 2>>{{1, 3}, {64, 37}, {100, 5}, {200, 6}, {768, 9}}) {
      auto x = random(size_t(K), 13), wf = random(size_t(K * N), 14);
      std::vector<uint16_t> w(wf.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = float_to_half(wf[i]);
      std::vector<float> y(size_t(N) + 1, 42.0f), widened(w.size() + 1, 42.0f);
      k->gemv_t_f16(x.data(), w.data(), y.data(), K, K, 1, N);
      k->half_to_float_row(w.data(), widened.data(), int64_t(w.size()));
      EXPECT_EQ(y[0], 42.0f) << k->isa << " wrote before n0";
      EXPECT_EQ(widened.back(), 42.0f) << k->isa << " wrote past n";
      for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(widened[i], half_to_float(w[i])) << k->isa << " i=" << i;
      // bf16 rows widen exactly too (NaN and -0 included, via the same bits).
      std::vector<uint16_t> wb(w.size());
      for (size_t i = 0; i < wb.size(); ++i) wb[i] = float_to_bf16(i % 7 == 3 ? -0.0f : wf[i]);
      std::vector<float> wbf(wb.size() + 1, 42.0f);
      k->bf16_to_float_row(wb.data(), wbf.data(), int64_t(wb.size()));
      EXPECT_EQ(wbf.back(), 42.0f) << k->isa << " bf16 wrote past n";
      for (size_t i = 0; i < wb.size(); ++i) {
        ASSERT_EQ(std::signbit(wbf[i]), std::signbit(bf16_to_float(wb[i])));
        ASSERT_EQ(wbf[i], bf16_to_float(wb[i])) << k->isa << " i=" << i;
      }
      for (int64_t n = 1; n < N; ++n) {
        double ref = 0;
        for (int64_t i = 0; i < K; ++i) ref += double(x[size_t(i)]) * half_to_float(w[size_t(n * K + i)]);
        ASSERT_NEAR(y[size_t(n)], ref, 1e-5 * (1 + K)) << k->isa << " K=" << K << " n=" << n;
      }
    }
  }
}

TEST(SimdKernels, GeluRowMatchesExactGelu) {
  for (const auto* k : tables()) {
    for (int64_t n : {1, 7, 8, 17, 1000}) {
      auto x = random(size_t(n), 15);
      for (auto& v : x) v *= 8.0f;  // both tails: GELU -> 0 and -> x
      if (n > 1) x[1] = 0.0f;
      std::vector<float> y(size_t(n) + 1, 42.0f);
      k->gelu_row(x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double v = x[size_t(i)];
        const double ref = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
        ASSERT_NEAR(y[size_t(i)], ref, 2e-7 * std::abs(v) + 1e-6) << k->isa << " x=" << v;
      }
      ASSERT_EQ(y[size_t(n)], 42.0f) << k->isa << " wrote past n=" << n;
    }
    float nan = NAN, y = 0;
    k->gelu_row(&nan, &y, 1);
    EXPECT_TRUE(std::isnan(y)) << k->isa;
  }
}

TEST(SimdKernels, SumRowMatchesReference) {
  for (const auto* k : tables()) {
    for (int64_t n : {0, 1, 31, 64, 65, 4099}) {
      auto x = random(size_t(n) + 1, 16);
      double ref = 0;
      for (int64_t i = 0; i < n; ++i) ref += x[size_t(i)];
      ASSERT_NEAR(k->sum_row(x.data(), n), ref, 1e-5 * (1 + n)) << k->isa << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace hf2pte::kernels
