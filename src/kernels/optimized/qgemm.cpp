// Quantized-filter GEMV/GEMM: packing, the thread split, and the plain C++
// kernels (the reference for the SIMD ones and the path on CPUs without
// AVX2 or AVX-512 VNNI). See qgemm.h for the packed layout.
#include "kernels/optimized/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/optimized/cpu_features.h"
#include "kernels/optimized/thread_pool.h"

namespace hf2pte::kernels {

namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Byte offset of (column c in its panel, k) inside an int8 panel.
inline int64_t int8_offset(int64_t c, int64_t k) { return (k / 4) * 64 + c * 4 + k % 4; }
/// Byte offset and nibble (0 low, 1 high) of (c, k) inside an int4 run of [../8][16][4].
inline int64_t int4_offset(int64_t c, int64_t k, int* high) {
  const int64_t j = k % 8;
  *high = j >= 4;
  return (k / 8) * 64 + c * 4 + j % 4;
}

/// The int4 value (0..15, zero at 8) of XNNPACK's packed filter at (r, c).
inline int xnn_nibble(const uint8_t* w, int64_t row_bytes, int64_t r, int64_t c) {
  const uint8_t b = w[r * row_bytes + c / 2];
  return c % 2 != 0 ? b >> 4 : b & 0xF;
}

QFilter empty_filter(QFilterKind kind, int64_t n, int64_t k, int64_t step) {
  QFilter f;
  f.kind = kind;
  f.n = n;
  f.k = k;
  f.kp = round_up(k, step);
  f.panels = (n + kQPanel - 1) / kQPanel;
  f.scale.assign(size_t(f.panels * kQPanel), 0.0f);
  f.wsum.assign(size_t(f.panels * kQPanel), 0);
  return f;
}

/// Fills the int4 runs of one panel's k range [k0, k0 + len) at `dst` from
/// XNNPACK's packing; padding stays 0x88 (value 0).
void pack_int4_run(uint8_t* dst, const uint8_t* w, int64_t row_bytes, int64_t n, int64_t col0, int64_t k0, int64_t len,
                   int64_t k, int32_t* wsum) {
  for (int64_t c = 0; c < kQPanel && col0 + c < n; ++c) {
    int32_t s = 0;
    for (int64_t kk = 0; kk < len && k0 + kk < k; ++kk) {
      const int v = xnn_nibble(w, row_bytes, col0 + c, k0 + kk);
      int high;
      uint8_t& b = dst[int4_offset(c, kk, &high)];
      b = high ? uint8_t((b & 0x0F) | (v << 4)) : uint8_t((b & 0xF0) | v);
      s += v - 8;
    }
    if (wsum != nullptr) wsum[c] += s;
  }
}

}  // namespace

QFilter pack_qfilter_int8(const int8_t* w, int64_t n, int64_t k, const float* scales) {
  QFilter f = empty_filter(QFilterKind::kInt8, n, k, 4);
  f.panel_bytes = kQPanel * f.kp;
  f.data.assign(size_t(f.panels * f.panel_bytes), 0);
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* panel = f.data.data() + (r / kQPanel) * f.panel_bytes;
    const int64_t c = r % kQPanel;
    int32_t s = 0;
    for (int64_t i = 0; i < k; ++i) {
      panel[int8_offset(c, i)] = uint8_t(w[r * k + i]);
      s += w[r * k + i];
    }
    f.wsum[size_t(r)] = s;
    f.scale[size_t(r)] = scales[r];
  }
  return f;
}

QFilter pack_qfilter_int4(const uint8_t* w, int64_t n, int64_t k, const float* scales) {
  QFilter f = empty_filter(QFilterKind::kInt4, n, k, 8);
  f.panel_bytes = kQPanel * f.kp / 2;
  f.data.assign(size_t(f.panels * f.panel_bytes), 0x88);
  const int64_t row_bytes = (k + 1) / 2;
  for (int64_t p = 0; p < f.panels; ++p) {
    pack_int4_run(f.data.data() + p * f.panel_bytes, w, row_bytes, n, p * kQPanel, 0, f.kp, k,
                  f.wsum.data() + p * kQPanel);
  }
  for (int64_t r = 0; r < n; ++r) f.scale[size_t(r)] = scales[r];
  return f;
}

QFilter pack_qfilter_int4_block(const uint8_t* w, int64_t n, int64_t k, int64_t group, const float* block_scales) {
  QFilter f = empty_filter(QFilterKind::kInt4Block, n, k, 8);
  f.group = group;
  const int64_t nb = k / group;
  const int64_t block_bytes = kQPanel * group / 2 + 2 * kQPanel;
  f.panel_bytes = nb * block_bytes;
  f.data.assign(size_t(f.panels * f.panel_bytes), 0x88);
  f.wsumf.assign(size_t(f.panels * kQPanel), 0.0f);
  const int64_t row_bytes = (k + 1) / 2;
  for (int64_t p = 0; p < f.panels; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = f.data.data() + p * f.panel_bytes + b * block_bytes;
      int32_t bw[kQPanel] = {};
      pack_int4_run(blk, w, row_bytes, n, p * kQPanel, b * group, group, k, bw);
      uint8_t* sc = blk + kQPanel * group / 2;
      for (int64_t c = 0; c < kQPanel; ++c) {
        const int64_t col = p * kQPanel + c;
        const float s = col < n ? block_scales[col * nb + b] : 0.0f;
        const uint16_t h = bf16_bits(s);
        std::memcpy(sc + 2 * c, &h, 2);
        f.wsumf[size_t(col)] += bf16_value(h) * float(bw[c]);
      }
    }
  }
  f.scale.clear();
  f.wsum.clear();
  return f;
}

namespace generic {
namespace {

/// The value (as stored: int8, or int4 + 8) of packed column c, k inside a panel.
inline int panel_value(const QFilter& w, const uint8_t* panel, int64_t c, int64_t kk) {
  if (w.kind == QFilterKind::kInt8) return int8_t(panel[int8_offset(c, kk)]);
  const uint8_t* run = panel;
  int64_t local = kk;
  if (w.kind == QFilterKind::kInt4Block) {
    run += (kk / w.group) * (kQPanel * w.group / 2 + 2 * kQPanel);
    local = kk % w.group;
  }
  int high;
  const uint8_t b = run[int4_offset(c, local, &high)];
  return high ? b >> 4 : b & 0xF;
}

inline float block_scale(const QFilter& w, const uint8_t* panel, int64_t c, int64_t b) {
  const uint8_t* sc = panel + b * (kQPanel * w.group / 2 + 2 * kQPanel) + kQPanel * w.group / 2;
  uint16_t h;
  std::memcpy(&h, sc + 2 * c, 2);
  return bf16_value(h);
}

void quantize_rows(const float* x, int64_t k, const float* inv, QFilterKind kind, int64_t group, QActs& a, int64_t r0,
                   int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * k;
    float inv_scale;
    if (inv == nullptr) {
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = 0; i < k; ++i) {
        lo = std::min(lo, xr[i]);
        hi = std::max(hi, xr[i]);
      }
      float zp;
      qparams_from_range(lo, hi, &a.scale[size_t(r)], &inv_scale, &zp);
      a.zp[size_t(r)] = int32_t(zp);
    } else {
      inv_scale = inv[r];
    }
    const float zp = float(a.zp[size_t(r)]);
    uint8_t* qr = a.q.data() + r * a.kp;
    int32_t total = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int32_t q = int32_t(std::clamp(std::nearbyint(xr[i] * inv_scale) + zp, -128.0f, 127.0f));
      qr[i] = kind == QFilterKind::kInt8 ? uint8_t(q + 128) : uint8_t(int8_t(q));
      total += q;
    }
    for (int64_t i = k; i < a.kp; ++i) qr[i] = kind == QFilterKind::kInt8 ? 128 : 0;
    a.qsum[size_t(r)] = total;
    for (int64_t b = 0; b < a.nblocks; ++b) {
      int32_t s = 0;
      for (int64_t i = b * group; i < (b + 1) * group; ++i) s += int8_t(qr[i]);
      a.bsum[size_t(r * a.nblocks + b)] = -8 * s;
    }
  }
}

void dynamic_panels(const QFilter& w, const QActs& a, const float* bias, float* y, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* panel = w.data.data() + p * w.panel_bytes;
    for (int64_t c = 0; c < kQPanel && p * kQPanel + c < w.n; ++c) {
      const int64_t col = p * kQPanel + c;
      for (int64_t r = 0; r < a.m; ++r) {
        const uint8_t* qr = a.q.data() + r * a.kp;
        const int32_t zp = a.zp[size_t(r)];
        float out;
        if (w.kind == QFilterKind::kInt4Block) {
          float acc = 0.0f;
          for (int64_t b = 0; b < w.nblocks(); ++b) {
            int32_t d = a.bsum[size_t(r * a.nblocks + b)];
            for (int64_t i = b * w.group; i < (b + 1) * w.group; ++i) d += panel_value(w, panel, c, i) * int8_t(qr[i]);
            acc += block_scale(w, panel, c, b) * float(d);
          }
          out = a.scale[size_t(r)] * (acc - float(zp) * w.wsumf[size_t(col)]);
        } else {
          int32_t d = 0;
          if (w.kind == QFilterKind::kInt8) {
            for (int64_t i = 0; i < w.kp; ++i) d += int32_t(qr[i]) * panel_value(w, panel, c, i);
            d -= (128 + zp) * w.wsum[size_t(col)];
          } else {
            for (int64_t i = 0; i < w.kp; ++i) d += panel_value(w, panel, c, i) * int8_t(qr[i]);
            d -= 8 * a.qsum[size_t(r)] + zp * w.wsum[size_t(col)];
          }
          out = float(d) * (a.scale[size_t(r)] * w.scale[size_t(col)]);
        }
        y[r * w.n + col] = out + (bias != nullptr ? bias[col] : 0.0f);
      }
    }
  }
}

void weight_only_panels(const QFilter& w, const float* xp, int64_t m, const float* bias, float* y, int64_t p0,
                        int64_t p1) {
  const int off = w.kind == QFilterKind::kInt8 ? 0 : 8;
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* panel = w.data.data() + p * w.panel_bytes;
    for (int64_t c = 0; c < kQPanel && p * kQPanel + c < w.n; ++c) {
      const int64_t col = p * kQPanel + c;
      for (int64_t r = 0; r < m; ++r) {
        const float* xr = xp + r * w.kp;
        float out = 0.0f;
        if (w.kind == QFilterKind::kInt4Block) {
          for (int64_t b = 0; b < w.nblocks(); ++b) {
            float acc = 0.0f;
            for (int64_t i = b * w.group; i < (b + 1) * w.group; ++i) acc += xr[i] * float(panel_value(w, panel, c, i) - 8);
            out += acc * block_scale(w, panel, c, b);
          }
        } else {
          for (int64_t i = 0; i < w.kp; ++i) out += xr[i] * float(panel_value(w, panel, c, i) - off);
          out *= w.scale[size_t(col)];
        }
        y[r * w.n + col] = out + (bias != nullptr ? bias[col] : 0.0f);
      }
    }
  }
}

}  // namespace

const QGemmKernels kQGemm{"generic", false, quantize_rows, dynamic_panels, weight_only_panels};
}  // namespace generic

namespace {

/// The tables this CPU can run, best first.
std::vector<const QGemmKernels*> runnable() {
  __builtin_cpu_init();
  std::vector<const QGemmKernels*> r;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma")) {
    r.push_back(&avx512vnni::kQGemm);
  }
  if (cpu_has_avx2_fma_f16c()) {
    r.push_back(&avx2::kQGemm);
  }
  r.push_back(&generic::kQGemm);
  return r;
}

const QGemmKernels* g_forced = nullptr;

const QGemmKernels& qkernels() {
  static const QGemmKernels* best = runnable().front();
  return g_forced != nullptr ? *g_forced : *best;
}

/// Panels per parallel_for chunk: about 64 KiB of weights, and at least one panel.
int64_t panel_grain(const QFilter& w, int64_t m) {
  const int64_t per_panel = std::max<int64_t>(1, w.panel_bytes * std::max<int64_t>(1, m / 4));
  return std::clamp<int64_t>((int64_t(64) << 10) / per_panel, 1, 64);
}

}  // namespace

const char* qgemm_isa() { return qkernels().isa; }
bool qgemm_force_isa(const char* isa) {
  if (isa == nullptr) {
    g_forced = nullptr;
    return true;
  }
  for (const QGemmKernels* k : runnable()) {
    if (std::strcmp(k->isa, isa) == 0) {
      g_forced = k;
      return true;
    }
  }
  return false;
}

void qgemm_dynamic(int64_t M, const float* x, int64_t quant_row, const QFilter& w, const float* bias, float* y) {
  if (M <= 0 || w.n <= 0) return;
  const QGemmKernels& kern = qkernels();
  // The calling thread's workspace; named through a reference so the pool's
  // workers read this one (a thread_local named inside the lambda is their own).
  thread_local QActs workspace;
  QActs& a = workspace;
  a.m = M;
  a.kp = w.kp;
  a.nblocks = w.nblocks();
  a.q.resize(size_t(M * w.kp));
  a.scale.resize(size_t(M));
  a.zp.resize(size_t(M));
  a.qsum.resize(size_t(M));
  a.bsum.resize(size_t(M * a.nblocks));
  a.q16.resize(kern.widened_int8_acts && w.kind == QFilterKind::kInt8 && M > 1 ? size_t(M * w.kp) : 0);
  const int64_t k = w.k;
  if (quant_row == k) {
    parallel_for(M, 16, [&](int64_t r0, int64_t r1) { kern.quantize_rows(x, k, nullptr, w.kind, w.group, a, r0, r1); });
  } else {
    // One quantization row spans several rows of k (num_nonbatch_dims > 1).
    thread_local std::vector<float> inv;
    inv.resize(size_t(M));
    const int64_t per = quant_row / k;
    for (int64_t g = 0; g * per < M; ++g) {
      const float* xg = x + g * quant_row;
      const int64_t len = std::min(quant_row, (M - g * per) * k);
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = 0; i < len; ++i) {
        lo = std::min(lo, xg[i]);
        hi = std::max(hi, xg[i]);
      }
      float scale, iv, zp;
      qparams_from_range(lo, hi, &scale, &iv, &zp);
      for (int64_t r = g * per; r < std::min(M, (g + 1) * per); ++r) {
        a.scale[size_t(r)] = scale;
        a.zp[size_t(r)] = int32_t(zp);
        inv[size_t(r)] = iv;
      }
    }
    kern.quantize_rows(x, k, inv.data(), w.kind, w.group, a, 0, M);
  }
  parallel_for(w.panels, panel_grain(w, M),
               [&](int64_t p0, int64_t p1) { kern.dynamic_panels(w, a, bias, y, p0, p1); });
}

void qgemm_weight_only(int64_t M, const float* x, const QFilter& w, const float* bias, float* y) {
  if (M <= 0 || w.n <= 0) return;
  const QGemmKernels& kern = qkernels();
  const float* xp = x;
  thread_local std::vector<float> padded;
  if (w.kp != w.k) {
    padded.assign(size_t(M * w.kp), 0.0f);
    for (int64_t r = 0; r < M; ++r) std::memcpy(padded.data() + r * w.kp, x + r * w.k, size_t(w.k) * 4);
    xp = padded.data();
  }
  parallel_for(w.panels, panel_grain(w, M),
               [&](int64_t p0, int64_t p1) { kern.weight_only_panels(w, xp, M, bias, y, p0, p1); });
}

}  // namespace hf2pte::kernels
