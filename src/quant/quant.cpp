#include "quant/quant.h"
#include "quant/hqq_simd.h"

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
constexpr int64_t kHqqLanes = 16;

// torch.round: half to even (the default FP rounding mode).
float round_even(float x) { return std::nearbyint(x); }
float clampf(float x, float lo, float hi) { return std::min(std::max(x, lo), hi); }

// Weights are held as float32 or, for bf16 checkpoints, as their exact bf16
// bits (half the memory); every computation widens them to float32 first
// (core's bf16_to_float, inline here for the hot loops).
inline float widen(float x) { return x; }
inline float widen(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Affine (torchao _choose_qparams_affine + _quantize_affine_no_dtype_cast,
// symmetric): scale = max(-min(min,0), max(max,0)) / ((qmax - qmin) / 2),
// at least the smallest normal; q = clamp(round(w * (1 / scale))).
template <class T>
void affine_block(const T* w, int64_t n, IntRange r, int8_t* q, float* scale) {
  float mn = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    mn = std::min(mn, widen(w[i]));
    mx = std::max(mx, widen(w[i]));
  }
  const float m = std::max(-mn, mx);
  float s = m / (float(r.qmax - r.qmin) / 2.0f);
  s = std::max(s, kSmallestNormal);
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) q[i] = int8_t(clampf(round_even(widen(w[i]) * inv), float(r.qmin), float(r.qmax)));
  *scale = s;
}

// The lane operations of HQQ, written as the AVX-512 instructions compute them
// (max/min return the second operand when either is NaN), so the scalar path
// and hqq_avx512.cpp give the same bits on every machine.
inline float vmax(float a, float b) { return a > b ? a : b; }
inline float vmin(float a, float b) { return a < b ? a : b; }

// One HQQ least-squares step of one block (torchao
// _choose_qparams_and_quantize_scale_only_hqq): Q = clamp(round(W / s)),
// s' = Σ(W·Q) / Σ(Q·Q) (sums left to right in float32, each product rounded),
// or s where Σ(Q·Q) = 0; s' = |max(s', eps)|. `stride` steps between the
// block's elements.
template <class T>
float hqq_step(const T* w, int64_t n, int64_t stride, IntRange r, float s) {
  float num = 0.0f, den = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = widen(w[i * stride]);
    const float q = vmin(vmax(round_even(x / s), float(r.qmin)), float(r.qmax));
    const float wq = x * q, qq = q * q;
    num = num + wq;
    den = den + qq;
  }
  const float next = den > 0.0f ? num / den : s;
  return std::fabs(vmax(next, kEps));
}

float hqq_rel(float next, float prev) { return std::fabs(next - prev) / vmax(prev, kEps); }

}  // namespace

std::string_view qparams_name(QParams p) { return p == QParams::kHqq ? "hqq" : "affine"; }

IntRange int_range(int bits) { return bits == 4 ? IntRange{-8, 7} : IntRange{-128, 127}; }

void serial_for(int64_t count, const std::function<void(int64_t, int64_t)>& f) {
  if (count > 0) f(0, count);
}

QuantizedWeight quantize_weight(std::span<const float> w, const BlockShape& shape, int bits, QParams algo,
                                const ParallelFor& pf) {
  std::vector<float> copy(w.begin(), w.end());
  return quantize_weight_in_place(copy, shape, bits, algo, pf);
}

namespace {

template <class T>
QuantizedWeight quantize_impl(std::span<T> w, const BlockShape& shape, int bits, QParams algo, const ParallelFor& pf) {
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
  // Work goes in tiles of 16 consecutive blocks (contiguous in memory), each
  // transposed so a vector lane holds one block; a last partial tile runs lane
  // by lane. Every lane does the same float32 operations in the same order.
  const float qabs = float(std::max(std::abs(r.qmin), std::abs(r.qmax)));
  std::vector<float>& s = out.scales;
  const int64_t tiles = nb / kHqqLanes;
  const HqqIsa isa = hqq_isa();
  T* tiled = w.data();  // tiles are transposed in place: w[t][i][lane] from here on
  pf(nb, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      float m = 0.0f;
      for (int64_t i = 0; i < bs; ++i) m = vmax(m, std::fabs(widen(w[size_t(k * bs + i)])));
      s[size_t(k)] = vmax(m / qabs, kEps);
    }
  });
  // Tile t = blocks [16 t, 16 t + 16), one contiguous range of w, becomes
  // tiled[t][i][lane] = w[(16 t + lane) * bs + i] over the same range.
  pf(tiles, [&](int64_t b, int64_t e) {
    std::vector<T> scratch(size_t(kHqqLanes * bs));
    for (int64_t t = b; t < e; ++t) {
      T* range = tiled + t * kHqqLanes * bs;
      std::copy(range, range + kHqqLanes * bs, scratch.begin());
      for (int64_t lane = 0; lane < kHqqLanes; ++lane)
        for (int64_t i = 0; i < bs; ++i) range[i * kHqqLanes + lane] = scratch[size_t(lane * bs + i)];
    }
  });
  const int64_t units = tiles + (nb - tiles * kHqqLanes);  // whole tiles, then the leftover blocks one by one
  std::vector<float> rel(static_cast<size_t>(units));
  for (int it = 0; it < kHqqIterations; ++it) {
    pf(units, [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        if (u < tiles) {
          float* st = s.data() + u * kHqqLanes;
          const T* wt = tiled + u * kHqqLanes * bs;
          if (isa == HqqIsa::kAvx512) {
            rel[size_t(u)] = hqq_tile_step_avx512(wt, bs, r.qmin, r.qmax, st);
          } else if (isa == HqqIsa::kAvx2) {
            rel[size_t(u)] = hqq_tile_step_avx2(wt, bs, r.qmin, r.qmax, st);
          } else {
            float m = 0.0f;
            for (int64_t lane = 0; lane < kHqqLanes; ++lane) {
              const float next = hqq_step(wt + lane, bs, kHqqLanes, r, st[lane]);
              m = vmax(m, hqq_rel(next, st[lane]));
              st[lane] = next;
            }
            rel[size_t(u)] = m;
          }
        } else {
          const int64_t k = tiles * kHqqLanes + (u - tiles);
          const float next = hqq_step(w.data() + k * bs, bs, 1, r, s[size_t(k)]);
          rel[size_t(u)] = hqq_rel(next, s[size_t(k)]);
          s[size_t(k)] = next;
        }
      }
    });
    float m = 0.0f;
    for (float x : rel) m = vmax(m, x);
    if (m < kHqqTolerance) break;
  }
  // Final integers, row-major: block k's element i sits at w[k * bs + i], or
  // in a tile at tiled[t][i][lane] for k = 16 t + lane.
  pf(nb, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const bool in_tile = k < tiles * kHqqLanes;
      if (in_tile && k % kHqqLanes == 0 && k + kHqqLanes <= e && isa != HqqIsa::kScalar) {
        const T* wt = tiled + (k / kHqqLanes) * kHqqLanes * bs;
        int8_t* q = out.q.data() + k * bs;
        if (isa == HqqIsa::kAvx512) {
          hqq_tile_quantize_avx512(wt, bs, r.qmin, r.qmax, s.data() + k, q);
        } else {
          hqq_tile_quantize_avx2(wt, bs, r.qmin, r.qmax, s.data() + k, q);
        }
        k += kHqqLanes - 1;
        continue;
      }
      const float sk = s[size_t(k)];
      const T* src = in_tile ? tiled + (k / kHqqLanes) * kHqqLanes * bs + k % kHqqLanes : w.data() + k * bs;
      const int64_t stride = in_tile ? kHqqLanes : 1;
      for (int64_t i = 0; i < bs; ++i) {
        out.q[size_t(k * bs + i)] = int8_t(vmin(vmax(round_even(widen(src[i * stride]) / sk), float(r.qmin)), float(r.qmax)));
      }
    }
  });
  return out;
}

}  // namespace

QuantizedWeight quantize_weight_in_place(std::span<float> w, const BlockShape& shape, int bits, QParams algo,
                                         const ParallelFor& pf) {
  return quantize_impl(w, shape, bits, algo, pf);
}

QuantizedWeight quantize_bf16_weight_in_place(std::span<uint16_t> w, const BlockShape& shape, int bits, QParams algo,
                                              const ParallelFor& pf) {
  return quantize_impl(w, shape, bits, algo, pf);
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

}  // namespace hf2pte::quant
