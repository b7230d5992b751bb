// Quantized-filter GEMV/GEMM (qgemm.h) against a straightforward reference
// computed from XNNPACK's own layouts: dequantized filters, activations
// rounded to their row's int8 grid with the reference runner's formulas.
// Every ISA path, odd sizes, every filter type, both input kinds; thread
// counts 1 and 2 give identical bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/optimized/qgemm.h"
#include "kernels/optimized/thread_pool.h"

namespace hf2pte::kernels {
namespace {

struct Case {
  QFilterKind kind;
  int64_t n, k, group;
};

float round_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

/// A random filter in XNNPACK's layout plus its dequantized [n, k] floats.
struct Filter {
  std::vector<int8_t> w8;
  std::vector<uint8_t> w4;
  std::vector<float> scales;  ///< [n] or [n, k / group]
  std::vector<float> deq;     ///< [n, k]
  QFilter packed;
};

Filter make_filter(const Case& c, std::mt19937& rng) {
  Filter f;
  std::uniform_int_distribution<int> v8(-128, 127), v4(-8, 7);
  std::uniform_real_distribution<float> sc(0.001f, 0.05f);
  f.deq.resize(size_t(c.n * c.k));
  if (c.kind == QFilterKind::kInt8) {
    f.w8.resize(size_t(c.n * c.k));
    for (auto& v : f.w8) v = int8_t(v8(rng));
    for (int64_t r = 0; r < c.n; ++r) f.scales.push_back(sc(rng));
    for (int64_t i = 0; i < c.n * c.k; ++i) f.deq[size_t(i)] = float(f.w8[size_t(i)]) * f.scales[size_t(i / c.k)];
    f.packed = pack_qfilter_int8(f.w8.data(), c.n, c.k, f.scales.data());
    return f;
  }
  const int64_t rb = (c.k + 1) / 2;
  f.w4.assign(size_t(c.n * rb), 0);
  std::vector<int> vals(size_t(c.n * c.k));
  for (int64_t r = 0; r < c.n; ++r) {
    for (int64_t i = 0; i < c.k; ++i) {
      const int v = v4(rng);
      vals[size_t(r * c.k + i)] = v;
      uint8_t& b = f.w4[size_t(r * rb + i / 2)];
      b = i % 2 ? uint8_t(b | ((v + 8) << 4)) : uint8_t(b | (v + 8));
    }
  }
  if (c.kind == QFilterKind::kInt4) {
    for (int64_t r = 0; r < c.n; ++r) f.scales.push_back(sc(rng));
    for (int64_t i = 0; i < c.n * c.k; ++i) f.deq[size_t(i)] = float(vals[size_t(i)]) * f.scales[size_t(i / c.k)];
    f.packed = pack_qfilter_int4(f.w4.data(), c.n, c.k, f.scales.data());
  } else {
    const int64_t nb = c.k / c.group;
    for (int64_t i = 0; i < c.n * nb; ++i) f.scales.push_back(round_bf16(sc(rng)));
    for (int64_t r = 0; r < c.n; ++r) {
      for (int64_t i = 0; i < c.k; ++i) {
        f.deq[size_t(r * c.k + i)] = float(vals[size_t(r * c.k + i)]) * f.scales[size_t(r * nb + i / c.group)];
      }
    }
    f.packed = pack_qfilter_int4_block(f.w4.data(), c.n, c.k, c.group, f.scales.data());
  }
  return f;
}

/// The reference runner's qdint8 rounding (xnn_ops.cpp quantize_rows), `row` values per quantization row.
std::vector<float> fake_quantize(const std::vector<float>& x, int64_t row) {
  std::vector<float> out(x.size());
  for (size_t r0 = 0; r0 < x.size(); r0 += size_t(row)) {
    const size_t len = std::min(size_t(row), x.size() - r0);
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = 0; i < len; ++i) {
      lo = std::min(lo, x[r0 + i]);
      hi = std::max(hi, x[r0 + i]);
    }
    const float inv_scale = lo == hi ? 1.0f : 255.0f / (hi - lo);
    const float zp_min_err = -128.0f + lo * inv_scale, zp_max_err = 127.0f + hi * inv_scale;
    float zp = zp_min_err + zp_max_err > 0 ? -128.0f - lo * inv_scale : 127.0f - hi * inv_scale;
    zp = std::nearbyint(std::clamp(zp, -128.0f, 127.0f));
    const float scale = 1.0f / inv_scale;
    for (size_t i = 0; i < len; ++i) {
      const float q = std::clamp(std::nearbyint(x[r0 + i] * inv_scale) + zp, -128.0f, 127.0f);
      out[r0 + i] = (q - zp) * scale;
    }
  }
  return out;
}

/// y = x . deq^T + bias in double, and sum |terms| per output for the tolerance.
void reference(const std::vector<float>& x, const Filter& f, const std::vector<float>& bias, int64_t M, int64_t n,
               int64_t k, std::vector<double>* y, std::vector<double>* mag) {
  y->assign(size_t(M * n), 0.0);
  mag->assign(size_t(M * n), 0.0);
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double s = bias[size_t(c)], a = std::fabs(bias[size_t(c)]);
      for (int64_t i = 0; i < k; ++i) {
        const double t = double(x[size_t(r * k + i)]) * double(f.deq[size_t(c * k + i)]);
        s += t;
        a += std::fabs(t);
      }
      (*y)[size_t(r * n + c)] = s;
      (*mag)[size_t(r * n + c)] = a;
    }
  }
}

std::string name(const Case& c, int64_t M) {
  const char* kinds[] = {"qcint8", "qcint4", "qbint4"};
  return std::string(kinds[int(c.kind)]) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " g=" + std::to_string(c.group) + " M=" + std::to_string(M);
}

const Case kCases[] = {
    {QFilterKind::kInt8, 37, 100, 0},  {QFilterKind::kInt8, 16, 64, 0},    {QFilterKind::kInt8, 70, 333, 0},
    {QFilterKind::kInt8, 5, 3, 0},     {QFilterKind::kInt4, 37, 100, 0},   {QFilterKind::kInt4, 33, 77, 0},
    {QFilterKind::kInt4, 48, 256, 0},  {QFilterKind::kInt4, 3, 1, 0},      {QFilterKind::kInt4Block, 37, 96, 32},
    {QFilterKind::kInt4Block, 50, 256, 64}, {QFilterKind::kInt4Block, 17, 64, 8}, {QFilterKind::kInt4Block, 64, 384, 128},
    // Enough panels that parallel_for splits them over 2 threads.
    {QFilterKind::kInt8, 1000, 260, 0}, {QFilterKind::kInt4, 1500, 300, 0}, {QFilterKind::kInt4Block, 1500, 320, 32},
};
const int64_t kRows[] = {1, 2, 5, 17};

class QGemm : public ::testing::TestWithParam<const char*> {  // param: the ISA's kernels
 protected:
  void SetUp() override {
    if (!qgemm_force_isa(GetParam())) GTEST_SKIP() << "this CPU cannot run the " << GetParam() << " kernels";
  }
  void TearDown() override {
    qgemm_force_isa(nullptr);
    set_pool_threads(2);
  }
};

TEST_P(QGemm, DynamicQuantMatchesFakeQuantReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Case& c : kCases) {
    Filter f = make_filter(c, rng);
    std::vector<float> bias(size_t(c.n));
    for (auto& b : bias) b = nd(rng);
    for (int64_t M : kRows) {
      for (int64_t rows_per_quant : {int64_t(1), int64_t(2)}) {
        if (rows_per_quant > 1 && M % rows_per_quant != 0) continue;
        std::vector<float> x(size_t(M * c.k));
        for (auto& v : x) v = nd(rng) + 0.3f;
        const int64_t qrow = rows_per_quant * c.k;
        std::vector<double> ref, mag;
        reference(fake_quantize(x, qrow), f, bias, M, c.n, c.k, &ref, &mag);
        std::vector<float> y1(size_t(M * c.n), NAN), y2(size_t(M * c.n), NAN);
        set_pool_threads(1);
        qgemm_dynamic(M, x.data(), qrow, f.packed, bias.data(), y1.data());
        set_pool_threads(2);
        qgemm_dynamic(M, x.data(), qrow, f.packed, bias.data(), y2.data());
        for (size_t i = 0; i < y1.size(); ++i) {
          ASSERT_NEAR(y1[i], ref[i], 1e-5 * mag[i] + 1e-6) << name(c, M) << " i=" << i << " qrow=" << qrow;
        }
        ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << name(c, M) << ": threads 1 vs 2";
      }
    }
  }
}

TEST_P(QGemm, WeightOnlyMatchesDequantizedReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Case& c : kCases) {
    Filter f = make_filter(c, rng);
    std::vector<float> bias(size_t(c.n));
    for (auto& b : bias) b = nd(rng);
    for (int64_t M : kRows) {
      std::vector<float> x(size_t(M * c.k));
      for (auto& v : x) v = nd(rng);
      std::vector<double> ref, mag;
      reference(x, f, bias, M, c.n, c.k, &ref, &mag);
      std::vector<float> y1(size_t(M * c.n), NAN), y2(size_t(M * c.n), NAN);
      set_pool_threads(1);
      qgemm_weight_only(M, x.data(), f.packed, bias.data(), y1.data());
      set_pool_threads(2);
      qgemm_weight_only(M, x.data(), f.packed, bias.data(), y2.data());
      for (size_t i = 0; i < y1.size(); ++i) {
        ASSERT_NEAR(y1[i], ref[i], 1e-5 * mag[i] + 1e-6) << name(c, M) << " i=" << i;
      }
      ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << name(c, M) << ": threads 1 vs 2";
    }
  }
}

TEST_P(QGemm, NoBiasAndConstantRows) {
  // A zero row (lo == hi: scale 1) and a constant positive row quantize like the reference.
  std::mt19937 rng(3);
  const Case c{QFilterKind::kInt8, 20, 40, 0};
  Filter f = make_filter(c, rng);
  std::vector<float> x(size_t(2 * c.k), 0.0f);
  for (int64_t i = 0; i < c.k; ++i) x[size_t(c.k + i)] = 0.75f;
  std::vector<double> ref, mag;
  reference(fake_quantize(x, c.k), f, std::vector<float>(size_t(c.n), 0.0f), 2, c.n, c.k, &ref, &mag);
  std::vector<float> y(size_t(2 * c.n), NAN);
  qgemm_dynamic(2, x.data(), c.k, f.packed, nullptr, y.data());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5 * mag[i] + 1e-6) << i;
}

INSTANTIATE_TEST_SUITE_P(Paths, QGemm, ::testing::Values("generic", "avx2", "avx512vnni"),
                         [](const auto& info) { return std::string(info.param); });

TEST(QGemmPack, MemoryIsAboutThePackedBytes) {
  std::mt19937 rng(5);
  const Case c{QFilterKind::kInt4Block, 256, 2048, 32};
  Filter f = make_filter(c, rng);
  const double file_bytes = double(c.n * c.k / 2 + c.n * c.k / c.group * 2);
  EXPECT_LE(double(f.packed.bytes()), 1.01 * file_bytes);
}

}  // namespace
}  // namespace hf2pte::kernels
