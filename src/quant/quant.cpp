#include "quant/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace hf2pte::quant {

namespace {

constexpr float kEps = std::numeric_limits<float>::epsilon();            // torch.finfo(float32).eps
constexpr float kSmallestNormal = std::numeric_limits<float>::min();     // torch.finfo(float32).smallest_normal
constexpr int kHqqIterations = 20;
constexpr float kHqqTolerance = 1e-5f;

// torch.round: half to even (the default FP rounding mode).
float round_even(float x) { return std::nearbyint(x); }
float clampf(float x, float lo, float hi) { return std::min(std::max(x, lo), hi); }

// Affine (torchao _choose_qparams_affine + _quantize_affine_no_dtype_cast,
// symmetric): scale = max(-min(min,0), max(max,0)) / ((qmax - qmin) / 2),
// at least the smallest normal; q = clamp(round(w * (1 / scale))).
void affine_block(const float* w, int64_t n, IntRange r, int8_t* q, float* scale) {
  float mn = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    mn = std::min(mn, w[i]);
    mx = std::max(mx, w[i]);
  }
  const float m = std::max(-mn, mx);
  float s = m / (float(r.qmax - r.qmin) / 2.0f);
  s = std::max(s, kSmallestNormal);
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) q[i] = int8_t(clampf(round_even(w[i] * inv), float(r.qmin), float(r.qmax)));
  *scale = s;
}

// One HQQ least-squares step of one block (torchao
// _choose_qparams_and_quantize_scale_only_hqq): Q = clamp(round(W / s)),
// s' = Σ(W·Q) / Σ(Q·Q) (sums left to right in float32), or s where Σ(Q·Q) = 0;
// s' = |max(s', eps)|.
float hqq_step(const float* w, int64_t n, IntRange r, float s) {
  float num = 0.0f, den = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float q = clampf(round_even(w[i] / s), float(r.qmin), float(r.qmax));
    num += w[i] * q;
    den += q * q;
  }
  const float next = den > 0.0f ? num / den : s;
  return std::fabs(std::max(next, kEps));
}

}  // namespace

std::string_view qparams_name(QParams p) { return p == QParams::kHqq ? "hqq" : "affine"; }

IntRange int_range(int bits) { return bits == 4 ? IntRange{-8, 7} : IntRange{-128, 127}; }

void serial_for(int64_t count, const std::function<void(int64_t, int64_t)>& f) {
  if (count > 0) f(0, count);
}

QuantizedWeight quantize_weight(std::span<const float> w, const BlockShape& shape, int bits, QParams algo,
                                const ParallelFor& pf) {
  const IntRange r = int_range(bits);
  const int64_t bs = shape.block(), nb = shape.num_blocks();
  QuantizedWeight out;
  out.q.resize(size_t(shape.rows * shape.cols));
  out.scales.resize(size_t(nb));
  if (algo == QParams::kAffine) {
    pf(nb, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) affine_block(w.data() + k * bs, bs, r, out.q.data() + k * bs, &out.scales[size_t(k)]);
    });
    return out;
  }
  // HQQ: s = max|w| / max(|qmin|, |qmax|), at least eps; then up to 20 steps,
  // stopping when the largest relative change over the whole tensor is < 1e-5.
  const float qabs = float(std::max(std::abs(r.qmin), std::abs(r.qmax)));
  std::vector<float>& s = out.scales;
  pf(nb, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      float m = 0.0f;
      for (int64_t i = 0; i < bs; ++i) m = std::max(m, std::fabs(w[size_t(k * bs + i)]));
      s[size_t(k)] = std::max(m / qabs, kEps);
    }
  });
  std::vector<float> rel(static_cast<size_t>(nb));
  for (int it = 0; it < kHqqIterations; ++it) {
    pf(nb, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const float prev = s[size_t(k)];
        const float next = hqq_step(w.data() + k * bs, bs, r, prev);
        rel[size_t(k)] = std::fabs(next - prev) / std::max(prev, kEps);
        s[size_t(k)] = next;
      }
    });
    if (*std::max_element(rel.begin(), rel.end()) < kHqqTolerance) break;
  }
  pf(nb, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const float sk = s[size_t(k)];
      for (int64_t i = 0; i < bs; ++i) {
        const size_t j = size_t(k * bs + i);
        out.q[j] = int8_t(clampf(round_even(w[j] / sk), float(r.qmin), float(r.qmax)));
      }
    }
  });
  return out;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN (quiet)
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void pack_int4_xnnpack(std::span<const int8_t> row, uint8_t* out) {
  const size_t n = row.size();
  for (size_t i = 0; i < n; i += 2) {
    const uint8_t lo = uint8_t(row[i] + 8);
    const uint8_t hi = i + 1 < n ? uint8_t(row[i + 1] + 8) : 0;
    out[i / 2] = uint8_t((hi << 4) | (lo & 0xF));
  }
}

void pack_int4_embedding(std::span<const int8_t> row, uint8_t* out) {
  const size_t n = row.size();
  for (size_t i = 0; i < n; i += 2) {
    const uint8_t hi = uint8_t(row[i] + 8);
    const uint8_t lo = i + 1 < n ? uint8_t(row[i + 1] + 8) : 0;
    out[i / 2] = uint8_t((hi << 4) | (lo & 0xF));
  }
}

TokenQParams token_qparams(std::span<const float> row) {
  float mn = 0.0f, mx = 0.0f;
  for (float x : row) {
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  float scale = (mx - mn) / 255.0f;
  scale = std::max(scale, kSmallestNormal);
  const float zp = clampf(-128.0f - round_even(mn / scale), -128.0f, 127.0f);
  return {scale, int32_t(zp)};
}

void fake_quantize_token(std::span<float> row, const TokenQParams& p) {
  const float inv = 1.0f / p.scale, zp = float(p.zero_point);
  for (float& x : row) x = (clampf(round_even(x * inv) + zp, -128.0f, 127.0f) - zp) * p.scale;
}

}  // namespace hf2pte::quant
