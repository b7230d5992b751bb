#include "quant/quant.h"
#include "quant/hqq_simd.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace hf2pte::quant {
namespace {

std::vector<float> random_weights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(n);
  for (auto& x : w) x = d(rng);
  return w;
}

TEST(Affine, ScaleIsMaxAbsOverHalfRangeAndTheTieIsTorchaosFloatOrder) {
  // Block [-1.5, 0.75]: m = 1.5, scale = 1.5 / 7.5 = 0.2 (float), q(-1.5) is the tie -7.5.
  std::vector<float> w = {-1.5f, 0.75f, 0.1f, 0.0f};
  auto r = quantize_weight(w, {1, 4, 0}, 4, QParams::kAffine);
  const float s = 1.5f / 7.5f, inv = 1.0f / s;
  EXPECT_EQ(r.scales[0], s);
  EXPECT_EQ(r.q[0], int8_t(std::max(-8.0f, std::nearbyint(-1.5f * inv))));
  EXPECT_EQ(r.q[1], int8_t(std::nearbyint(0.75f * inv)));
  // The positive maximum lands on +7.5 -> 8 -> clamped to 7 (int8: 127).
  auto p = quantize_weight(std::vector<float>{1.0f, -0.5f}, {1, 2, 0}, 8, QParams::kAffine);
  EXPECT_EQ(p.q[0], 127);
  EXPECT_EQ(p.scales[0], 1.0f / 127.5f);
}

TEST(Affine, AllZeroBlockGetsTheSmallestNormalScale) {
  auto r = quantize_weight(std::vector<float>(8, 0.0f), {1, 8, 4}, 4, QParams::kAffine);
  ASSERT_EQ(r.scales.size(), 2u);
  EXPECT_EQ(r.scales[0], std::numeric_limits<float>::min());
  for (auto q : r.q) EXPECT_EQ(q, 0);
}

TEST(Hqq, IsALeastSquaresFixedPointAndBeatsMaxAbs) {
  auto w = random_weights(64 * 128, 7);
  BlockShape shape{64, 128, 32};
  auto h = quantize_weight(w, shape, 4, QParams::kHqq);
  auto a = quantize_weight(w, shape, 4, QParams::kAffine);
  double eh = 0, ea = 0;
  for (int64_t k = 0; k < shape.num_blocks(); ++k) {
    for (int64_t i = 0; i < 32; ++i) {
      const size_t j = size_t(k * 32 + i);
      eh += std::pow(w[j] - h.q[j] * h.scales[size_t(k)], 2);
      ea += std::pow(w[j] - a.q[j] * a.scales[size_t(k)], 2);
      EXPECT_GE(h.q[j], -8);
      EXPECT_LE(h.q[j], 7);
    }
  }
  EXPECT_LT(eh, ea);  // HQQ minimises the block error that max-abs does not
  // At the fixed point s = Σ(W·Q) / Σ(Q·Q) of the final integers (to the tolerance).
  for (int64_t k = 0; k < 4; ++k) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < 32; ++i) {
      num += double(w[size_t(k * 32 + i)]) * h.q[size_t(k * 32 + i)];
      den += double(h.q[size_t(k * 32 + i)]) * h.q[size_t(k * 32 + i)];
    }
    EXPECT_NEAR(h.scales[size_t(k)], num / den, 1e-4 * h.scales[size_t(k)]);
  }
}

TEST(Hqq, BytesDoNotDependOnHowTheWorkIsSplit) {
  auto w = random_weights(96 * 64, 3);
  BlockShape shape{96, 64, 0};
  auto serial = quantize_weight(w, shape, 8, QParams::kHqq);
  ParallelFor odd_chunks = [](int64_t n, const std::function<void(int64_t, int64_t)>& f) {
    for (int64_t b = n; b > 0; b -= 7) f(std::max<int64_t>(0, b - 7), b);  // reversed, uneven chunks
  };
  auto split = quantize_weight(w, shape, 8, QParams::kHqq, odd_chunks);
  EXPECT_EQ(serial.q, split.q);
  EXPECT_EQ(serial.scales, split.scales);
}

// The AVX-512 and AVX2 tile steps and the scalar lanes perform the same
// float32 operations in the same order: identical bytes, on shapes with whole
// tiles, a partial last tile, per-channel rows and 4 / 8 bits.
TEST(Hqq, SimdAndScalarPathsGiveTheSameBytes) {
  if (hqq_best_isa() == HqqIsa::kScalar) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  struct Shape {
    BlockShape shape;
    int bits;
  };
  for (const Shape& c : {Shape{{40, 96, 32}, 4}, Shape{{17, 64, 0}, 8}, Shape{{33, 160, 32}, 8}, Shape{{5, 64, 32}, 4}}) {
    auto w = random_weights(size_t(c.shape.rows * c.shape.cols), uint32_t(c.shape.rows));
    const HqqIsa was = set_hqq_isa(HqqIsa::kScalar);
    auto scalar = quantize_weight(w, c.shape, c.bits, QParams::kHqq);
    for (HqqIsa isa : {HqqIsa::kAvx2, HqqIsa::kAvx512}) {
      if (isa > hqq_best_isa()) continue;
      set_hqq_isa(isa);
      auto simd = quantize_weight(w, c.shape, c.bits, QParams::kHqq);
      EXPECT_EQ(simd.q, scalar.q) << int(isa) << ": " << c.shape.rows << "x" << c.shape.cols;
      EXPECT_EQ(simd.scales, scalar.scales) << int(isa) << ": " << c.shape.rows << "x" << c.shape.cols;
    }
    set_hqq_isa(was);
  }
}

TEST(Hqq, InPlaceEqualsCopying) {
  auto w = random_weights(48 * 64, 11);
  auto a = quantize_weight(w, {48, 64, 32}, 4, QParams::kHqq);
  auto scratch = w;
  auto b = quantize_weight_in_place(scratch, {48, 64, 32}, 4, QParams::kHqq);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.scales, b.scales);
}

// bf16 checkpoints are quantized from their bf16 bits (half the memory): the
// result equals quantizing the exactly widened float32 values.
TEST(Hqq, Bf16WeightsEqualTheirWidenedFloats) {
  auto w = random_weights(40 * 96, 5);
  std::vector<uint16_t> bits(w.size());
  std::vector<float> widened(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    bits[i] = float_to_bf16(w[i]);
    widened[i] = bf16_to_float(bits[i]);
  }
  for (QParams algo : {QParams::kHqq, QParams::kAffine}) {
    auto a = quantize_weight(widened, {40, 96, 32}, 4, algo);
    auto b = quantize_bf16_weight_in_place(bits, {40, 96, 32}, 4, algo);
    EXPECT_EQ(a.q, b.q);
    EXPECT_EQ(a.scales, b.scales);
    for (size_t i = 0; i < w.size(); ++i) bits[i] = float_to_bf16(w[i]);  // in place: refill
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3F82);
  EXPECT_EQ(bf16_to_float(0x3F82), 1.0f + 2.0f / 128);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Pack, XnnpackPutsTheEvenColumnLowAndEmbeddingsHigh) {
  std::vector<int8_t> row = {-8, 7, 0, -1, 3};
  uint8_t x[3], e[3];
  pack_int4_xnnpack(row, x);
  pack_int4_embedding(row, e);
  EXPECT_EQ(x[0], 0xF0);  // low nibble -8 + 8 = 0, high 7 + 8 = 15
  EXPECT_EQ(e[0], 0x0F);
  EXPECT_EQ(x[2], 0x0B);  // odd count: padded high nibble 0
  EXPECT_EQ(e[2], 0xB0);
  for (int64_t c = 0; c < 5; ++c) {
    EXPECT_EQ(xnnpack_int4_at(x, c), row[size_t(c)]);
    EXPECT_EQ(embedding_int4_at(e, c), row[size_t(c)]);
  }
}

}  // namespace
}  // namespace hf2pte::quant
