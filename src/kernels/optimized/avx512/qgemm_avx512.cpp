// AVX-512 VNNI versions of the quantized-filter kernels (qgemm.h). This file
// is the whole hf2pte_kernels_optimized_avx512vnni library, compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma; qgemm.cpp calls it only
// when __builtin_cpu_supports says the CPU has them.
//
// Dynamic quantization: vpdpbusd multiplies unsigned bytes by signed bytes.
// int8 filters take the activation as q + 128 (unsigned) against the signed
// weights and subtract (128 + zp) * sum(w) per column; int4 filters take the
// stored nibble (value + 8, unsigned) against the signed q and subtract
// 8 * sum(q) (per row, or per block as the accumulator's initial value) and
// zp * sum(w). Integer parts are exact; only the float scale steps round.
// GCC 12's avx512fintrin.h seeds conversions with _mm512_undefined_*(), which
// -Wuninitialized reports at every inlined call site.
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/optimized/qgemm.h"

// The tiles' MR x P loops must unroll fully so their accumulators live in
// registers (-O2 leaves them as stack arrays otherwise).
#define HF2PTE_UNROLL _Pragma("GCC unroll 16")

namespace hf2pte::kernels {

namespace avx512vnni {
namespace {

inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1); }

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m512 load_bf16x16(const uint8_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// Decode streams each thread's panels once: a software prefetch this far
/// ahead of the loads keeps more misses in flight while the int4 kernels do
/// their (twice int8's) arithmetic per byte. Measured with hf2pte_kernel_bench
/// --quantized on an Intel Xeon (2 threads): 8da4w GEMVs 19-21 -> 22-24 GB/s
/// at 1 KiB; 0.5, 1.5, 2, 4, 8 and 16 KiB were no better.
constexpr int64_t kPrefetchBytes = 1024;
inline void prefetch_ahead(const uint8_t* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + off), _MM_HINT_T0);
  }
}

/// The int4 GEMVs' prefetches, on AMD CPUs, cost more than they bring: on
/// a Zen 5 EPYC, bench-1b 8da4w decode ran 1.03-1.13x faster without them in
/// 8 of 9 alternating pairs (e.g. 63.1 -> 71.6 tok/s), while 8da8w's int8
/// GEMV was as fast or faster with them (3 pairs). So the int4 kernels issue
/// them on other vendors' CPUs only.
bool int4_prefetch_pays() {
  __builtin_cpu_init();
  return !__builtin_cpu_is("amd");
}
const bool kInt4Prefetch = int4_prefetch_pays();
inline void prefetch_int4(const uint8_t* p, int64_t bytes) {
  if (kInt4Prefetch) prefetch_ahead(p, bytes);
}

inline void unpack_nibbles(__m512i v, __m512i* lo, __m512i* hi) {
  asm("" : "+v"(v));  // one load, not one folded into each of the two uses
  const __m512i m = _mm512_set1_epi8(0x0F);
  *lo = _mm512_and_si512(v, m);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
}

// ---- activation quantization ----

void quantize_rows(const float* x, int64_t k, const float* inv, QFilterKind kind, int64_t group, QActs& a, int64_t r0,
                   int64_t r1) {
  const bool shift = kind == QFilterKind::kInt8;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * k;
    float inv_scale;
    if (inv == nullptr) {
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      for (int64_t i = 0; i < k; i += 16) {
        const __mmask16 m = tail_mask(k - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, xr + i);
        // min/max(v, acc) keep acc where v is NaN, as std::min(acc, v) does.
        lo = _mm512_mask_min_ps(lo, m, v, lo);
        hi = _mm512_mask_max_ps(hi, m, v, hi);
      }
      float zp;
      qparams_from_range(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi), &a.scale[size_t(r)], &inv_scale, &zp);
      a.zp[size_t(r)] = int32_t(zp);
    } else {
      inv_scale = inv[r];
    }
    const __m512 vinv = _mm512_set1_ps(inv_scale), vzp = _mm512_set1_ps(float(a.zp[size_t(r)]));
    const __m512 qlo = _mm512_set1_ps(-128.0f), qhi = _mm512_set1_ps(127.0f);
    uint8_t* qr = a.q.data() + r * a.kp;
    __m512i total = _mm512_setzero_si512();
    for (int64_t i = 0; i < k; i += 16) {
      const __mmask16 m = tail_mask(k - i);
      const __m512 v = _mm512_maskz_loadu_ps(m, xr + i);
      __m512 q = _mm512_add_ps(_mm512_roundscale_ps(_mm512_mul_ps(v, vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                               vzp);
      q = _mm512_min_ps(_mm512_max_ps(q, qlo), qhi);
      const __m512i qi = _mm512_maskz_cvtps_epi32(m, q);
      total = _mm512_add_epi32(total, qi);
      __m128i b = _mm512_cvtsepi32_epi8(qi);
      if (shift) b = _mm_xor_si128(b, _mm_set1_epi8(char(0x80)));
      _mm_mask_storeu_epi8(qr + i, m, b);
    }
    for (int64_t i = k; i < a.kp; ++i) qr[i] = shift ? 128 : 0;
    a.qsum[size_t(r)] = _mm512_reduce_add_epi32(total);
    for (int64_t b = 0; b < a.nblocks; ++b) {
      __m512i s = _mm512_setzero_si512();
      for (int64_t i = b * group; i < (b + 1) * group; i += 16) {
        const __mmask16 m = tail_mask((b + 1) * group - i);
        s = _mm512_add_epi32(s, _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, qr + i)));
      }
      a.bsum[size_t(r * a.nblocks + b)] = -8 * _mm512_reduce_add_epi32(s);
    }
  }
}

// ---- dynamic quantization tiles: MR rows x P panels, the whole k ----

struct TileArgs {
  const QFilter& w;
  const QActs& a;
  const float* bias;
  float* y;
};

inline void store_out(const TileArgs& t, int64_t r, int64_t col0, __m512 v) {
  const __mmask16 m = tail_mask(t.w.n - col0);
  if (t.bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, t.bias + col0));
  _mm512_mask_storeu_ps(t.y + r * t.w.n + col0, m, v);
}

/// Per-channel epilogue: y = float(acc - corr) * (x_scale * w_scale).
template <int MR, int P>
inline void channel_epilogue(const TileArgs& t, int64_t m0, int64_t p0, __m512i (&acc)[MR][P]) {
  const bool int8 = t.w.kind == QFilterKind::kInt8;
  HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
    const int64_t col0 = (p0 + p) * kQPanel;
    const __m512i wsum = _mm512_loadu_si512(t.w.wsum.data() + col0);
    const __m512 ws = _mm512_loadu_ps(t.w.scale.data() + col0);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      const int64_t row = m0 + r;
      const int32_t zp = t.a.zp[size_t(row)];
      __m512i d;
      if (int8) {
        d = _mm512_sub_epi32(acc[r][p], _mm512_mullo_epi32(wsum, _mm512_set1_epi32(128 + zp)));
      } else {
        d = _mm512_sub_epi32(acc[r][p], _mm512_add_epi32(_mm512_set1_epi32(8 * t.a.qsum[size_t(row)]),
                                                          _mm512_mullo_epi32(wsum, _mm512_set1_epi32(zp))));
      }
      const __m512 s = _mm512_mul_ps(_mm512_set1_ps(t.a.scale[size_t(row)]), ws);
      store_out(t, row, col0, _mm512_mul_ps(_mm512_cvtepi32_ps(d), s));
    }
  }
}

template <int MR, int P>
void tile_dq_int8(const TileArgs& t, int64_t m0, int64_t p0) {
  const int64_t kp = t.w.kp;
  const uint8_t* wp = t.w.data.data() + p0 * t.w.panel_bytes;
  const uint8_t* ar = t.a.q.data() + m0 * t.a.kp;
  __m512i acc[MR][P];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) HF2PTE_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_si512();
  for (int64_t kk = 0; kk < kp; kk += 4) {
    __m512i wv[P];
    HF2PTE_UNROLL for (int p = 0; p < P; ++p) wv[p] = _mm512_loadu_si512(wp + p * t.w.panel_bytes + kk * kQPanel);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(load_i32(ar + r * t.a.kp + kk));
      HF2PTE_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], av, wv[p]);
    }
  }
  channel_epilogue<MR, P>(t, m0, p0, acc);
}

template <int MR, int P>
void tile_dq_int4(const TileArgs& t, int64_t m0, int64_t p0) {
  const int64_t kp = t.w.kp;
  const uint8_t* wp = t.w.data.data() + p0 * t.w.panel_bytes;
  const uint8_t* ar = t.a.q.data() + m0 * t.a.kp;
  __m512i acc[MR][P];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) HF2PTE_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_si512();
  for (int64_t kk = 0; kk < kp; kk += 8) {
    __m512i lo[P], hi[P];
    HF2PTE_UNROLL for (int p = 0; p < P; ++p) unpack_nibbles(_mm512_loadu_si512(wp + p * t.w.panel_bytes + kk * 8), &lo[p], &hi[p]);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512i a0 = _mm512_set1_epi32(load_i32(ar + r * t.a.kp + kk));
      const __m512i a1 = _mm512_set1_epi32(load_i32(ar + r * t.a.kp + kk + 4));
      HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
        acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], lo[p], a0);
        acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], hi[p], a1);
      }
    }
  }
  channel_epilogue<MR, P>(t, m0, p0, acc);
}

template <int MR, int P>
void tile_dq_int4_block(const TileArgs& t, int64_t m0, int64_t p0) {
  const int64_t g = t.w.group, nb = t.w.nblocks();
  const int64_t block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  const uint8_t* wp = t.w.data.data() + p0 * t.w.panel_bytes;
  const uint8_t* ar = t.a.q.data() + m0 * t.a.kp;
  __m512 facc[MR][P];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) HF2PTE_UNROLL for (int p = 0; p < P; ++p) facc[r][p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i acc[MR][P];
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512i init = _mm512_set1_epi32(t.a.bsum[size_t((m0 + r) * nb + b)]);
      HF2PTE_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = init;
    }
    const uint8_t* wb = wp + b * block_bytes;
    for (int64_t kk = 0; kk < g; kk += 8) {
      __m512i lo[P], hi[P];
      HF2PTE_UNROLL for (int p = 0; p < P; ++p) unpack_nibbles(_mm512_loadu_si512(wb + p * t.w.panel_bytes + kk * 8), &lo[p], &hi[p]);
      HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
        const uint8_t* q = ar + r * t.a.kp + b * g + kk;
        const __m512i a0 = _mm512_set1_epi32(load_i32(q)), a1 = _mm512_set1_epi32(load_i32(q + 4));
        HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], lo[p], a0);
          acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], hi[p], a1);
        }
      }
    }
    HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
      const __m512 sc = load_bf16x16(wb + p * t.w.panel_bytes + kQPanel * g / 2);
      HF2PTE_UNROLL for (int r = 0; r < MR; ++r) facc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][p]), sc, facc[r][p]);
    }
  }
  HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
    const int64_t col0 = (p0 + p) * kQPanel;
    const __m512 wsumf = _mm512_loadu_ps(t.w.wsumf.data() + col0);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      const int64_t row = m0 + r;
      const __m512 v = _mm512_fnmadd_ps(_mm512_set1_ps(float(t.a.zp[size_t(row)])), wsumf, facc[r][p]);
      store_out(t, row, col0, _mm512_mul_ps(_mm512_set1_ps(t.a.scale[size_t(row)]), v));
    }
  }
}

// Decode (one row): one panel at a time, its weights one sequential stream,
// four independent accumulators over k (int32: their sum is exact).
void gemv_dq_int8(const TileArgs& t, int64_t p) {
  const int64_t kp = t.w.kp;
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  const uint8_t* q = t.a.q.data();
  __m512i acc[1][1], a1 = _mm512_setzero_si512(), a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
  acc[0][0] = _mm512_setzero_si512();
  int64_t kk = 0;
  for (; kk + 16 <= kp; kk += 16) {
    prefetch_ahead(wp + kk * 16, 256);
    acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], _mm512_set1_epi32(load_i32(q + kk)), _mm512_loadu_si512(wp + kk * 16));
    a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(load_i32(q + kk + 4)), _mm512_loadu_si512(wp + kk * 16 + 64));
    a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(load_i32(q + kk + 8)), _mm512_loadu_si512(wp + kk * 16 + 128));
    a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(load_i32(q + kk + 12)), _mm512_loadu_si512(wp + kk * 16 + 192));
  }
  for (; kk < kp; kk += 4) {
    acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], _mm512_set1_epi32(load_i32(q + kk)), _mm512_loadu_si512(wp + kk * 16));
  }
  acc[0][0] = _mm512_add_epi32(_mm512_add_epi32(acc[0][0], a1), _mm512_add_epi32(a2, a3));
  channel_epilogue<1, 1>(t, 0, p, acc);
}

void gemv_dq_int4(const TileArgs& t, int64_t p) {
  const int64_t kp = t.w.kp;
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  const uint8_t* q = t.a.q.data();
  __m512i acc[1][1], a1 = _mm512_setzero_si512(), a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
  acc[0][0] = _mm512_setzero_si512();
  int64_t kk = 0;
  __m512i lo, hi, lo2, hi2;
  for (; kk + 16 <= kp; kk += 16) {
    prefetch_int4(wp + kk * 8, 128);
    unpack_nibbles(_mm512_loadu_si512(wp + kk * 8), &lo, &hi);
    unpack_nibbles(_mm512_loadu_si512(wp + kk * 8 + 64), &lo2, &hi2);
    acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], lo, _mm512_set1_epi32(load_i32(q + kk)));
    a1 = _mm512_dpbusd_epi32(a1, hi, _mm512_set1_epi32(load_i32(q + kk + 4)));
    a2 = _mm512_dpbusd_epi32(a2, lo2, _mm512_set1_epi32(load_i32(q + kk + 8)));
    a3 = _mm512_dpbusd_epi32(a3, hi2, _mm512_set1_epi32(load_i32(q + kk + 12)));
  }
  for (; kk < kp; kk += 8) {
    unpack_nibbles(_mm512_loadu_si512(wp + kk * 8), &lo, &hi);
    acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], lo, _mm512_set1_epi32(load_i32(q + kk)));
    a1 = _mm512_dpbusd_epi32(a1, hi, _mm512_set1_epi32(load_i32(q + kk + 4)));
  }
  acc[0][0] = _mm512_add_epi32(_mm512_add_epi32(acc[0][0], a1), _mm512_add_epi32(a2, a3));
  channel_epilogue<1, 1>(t, 0, p, acc);
}

// Blocks: int32 accumulators per block (lo / hi nibbles), summed exactly,
// then one fmadd with the block's 16 scales, which follow its weights. NP
// panels run in lockstep, block by block: NP streams in flight at once keep
// more misses outstanding than one panel after another. Each panel's sums
// run in the same order whatever NP is.
template <int NP>
void gemv_dq_int4_block(const TileArgs& t, const int64_t (&panels)[NP]) {
  const int64_t g = t.w.group, nb = t.w.nblocks();
  const int64_t block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  const uint8_t* wb[NP];
  HF2PTE_UNROLL for (int j = 0; j < NP; ++j) wb[j] = t.w.data.data() + panels[j] * t.w.panel_bytes;
  const uint8_t* q = t.a.q.data();
  __m512 f0[NP], f1[NP];
  HF2PTE_UNROLL for (int j = 0; j < NP; ++j) f0[j] = f1[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += g) {
    HF2PTE_UNROLL for (int j = 0; j < NP; ++j) {
      const uint8_t* w = wb[j] + b * block_bytes;
      prefetch_int4(w, block_bytes);
      // Four int32 chains (two 64-byte loads per step) halve the dpbusd latency
      // chain per block; their sum is exact.
      __m512i a0 = _mm512_set1_epi32(t.a.bsum[size_t(b)]), a1 = _mm512_setzero_si512();
      __m512i a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
      __m512i lo, hi, lo2, hi2;
      int64_t kk = 0;
      for (; kk + 16 <= g; kk += 16) {
        unpack_nibbles(_mm512_loadu_si512(w + kk * 8), &lo, &hi);
        unpack_nibbles(_mm512_loadu_si512(w + kk * 8 + 64), &lo2, &hi2);
        a0 = _mm512_dpbusd_epi32(a0, lo, _mm512_set1_epi32(load_i32(q + kk)));
        a1 = _mm512_dpbusd_epi32(a1, hi, _mm512_set1_epi32(load_i32(q + kk + 4)));
        a2 = _mm512_dpbusd_epi32(a2, lo2, _mm512_set1_epi32(load_i32(q + kk + 8)));
        a3 = _mm512_dpbusd_epi32(a3, hi2, _mm512_set1_epi32(load_i32(q + kk + 12)));
      }
      for (; kk < g; kk += 8) {
        unpack_nibbles(_mm512_loadu_si512(w + kk * 8), &lo, &hi);
        a0 = _mm512_dpbusd_epi32(a0, lo, _mm512_set1_epi32(load_i32(q + kk)));
        a1 = _mm512_dpbusd_epi32(a1, hi, _mm512_set1_epi32(load_i32(q + kk + 4)));
      }
      const __m512 d = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)));
      const __m512 sc = load_bf16x16(w + kQPanel * g / 2);
      // Alternate two float accumulators (even / odd blocks): fixed order.
      if (b % 2 == 0) {
        f0[j] = _mm512_fmadd_ps(d, sc, f0[j]);
      } else {
        f1[j] = _mm512_fmadd_ps(d, sc, f1[j]);
      }
    }
  }
  HF2PTE_UNROLL for (int j = 0; j < NP; ++j) {
    const int64_t col0 = panels[j] * kQPanel;
    const __m512 v = _mm512_fnmadd_ps(_mm512_set1_ps(float(t.a.zp[0])), _mm512_loadu_ps(t.w.wsumf.data() + col0),
                                      _mm512_add_ps(f0[j], f1[j]));
    store_out(t, 0, col0, _mm512_mul_ps(_mm512_set1_ps(t.a.scale[0]), v));
  }
}

constexpr int kMR = 4;
constexpr int kP = 2;

template <int MR, int P>
void run_dq_tile(const TileArgs& t, int64_t m0, int64_t p0) {
  switch (t.w.kind) {
    case QFilterKind::kInt8: tile_dq_int8<MR, P>(t, m0, p0); break;
    case QFilterKind::kInt4: tile_dq_int4<MR, P>(t, m0, p0); break;
    case QFilterKind::kInt4Block: tile_dq_int4_block<MR, P>(t, m0, p0); break;
  }
}

template <int P>
void run_dq_rows(const TileArgs& t, int64_t m0, int64_t mr, int64_t p0) {
  switch (mr) {
    case 1: run_dq_tile<1, P>(t, m0, p0); break;
    case 2: run_dq_tile<2, P>(t, m0, p0); break;
    case 3: run_dq_tile<3, P>(t, m0, p0); break;
    default: run_dq_tile<4, P>(t, m0, p0); break;
  }
}

void dynamic_panels(const QFilter& w, const QActs& a, const float* bias, float* y, int64_t p0, int64_t p1) {
  const TileArgs t{w, a, bias, y};
  if (a.m == 1) {
    auto one = [&](int64_t p) {
      switch (w.kind) {
        case QFilterKind::kInt8: gemv_dq_int8(t, p); break;
        case QFilterKind::kInt4: gemv_dq_int4(t, p); break;
        case QFilterKind::kInt4Block: gemv_dq_int4_block<1>(t, {p}); break;
      }
    };
    // Two panel streams at once (the two halves of the range): more misses in
    // flight than one sequential stream. Alternating whole panels measured
    // (hf2pte_kernel_bench --quantized, Intel Xeon, 2 threads) 8da4w 23 -> 24.5
    // GB/s, 8da8w 26 -> 27.5, four streams no better. Running the two int4
    // panels in lockstep, block by block, took bench-1b 8da4w decode from
    // 55-70 to 59-73 tok/s on a Zen 5 (alternating pairs); for int8 panels
    // lockstep measured the same as alternating (15 kernel pairs), so they
    // alternate.
    const int64_t half = (p1 - p0 + 1) / 2;
    for (int64_t i = 0; i < half; ++i) {
      if (w.kind == QFilterKind::kInt4Block && p0 + half + i < p1) {
        gemv_dq_int4_block<2>(t, {p0 + i, p0 + half + i});
        continue;
      }
      one(p0 + i);
      if (p0 + half + i < p1) one(p0 + half + i);
    }
    return;
  }
  for (int64_t p = p0; p < p1; p += kP) {
    const int64_t np = std::min<int64_t>(kP, p1 - p);
    for (int64_t m0 = 0; m0 < a.m; m0 += kMR) {
      const int64_t mr = std::min<int64_t>(kMR, a.m - m0);
      if (np == kP) {
        run_dq_rows<kP>(t, m0, mr, p);
      } else {
        run_dq_rows<1>(t, m0, mr, p);
      }
    }
  }
}

// ---- weight-only (fp32 activations) ----

/// Byte j of every 32-bit lane, sign-extended, as floats.
template <int J>
inline __m512 byte_lane(__m512i v) {
  return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * J), 24));
}

/// The int4 weights' values as floats, indexed by the stored nibble (value + 8).
inline __m512 nibble_table() {
  return _mm512_setr_ps(-8.f, -7.f, -6.f, -5.f, -4.f, -3.f, -2.f, -1.f, 0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f);
}

/// Nibble I (0..7, from the lowest bits) of every 32-bit lane as its weight
/// value: vpermps reads only the low 4 bits of each index lane, so one shift
/// and one table lookup replace unpacking, sign extension and conversion. In
/// a panel's 32-bit lane, nibble 2j is k = 8t + j and nibble 2j + 1 is
/// k = 8t + 4 + j (the low and high halves of byte j).
template <int I>
inline __m512 nibble_lane(__m512i v, __m512 table) {
  return _mm512_permutexvar_ps(I == 0 ? v : _mm512_srli_epi32(v, 4 * I), table);
}

struct WoArgs {
  const QFilter& w;
  const float* x;  ///< [m][kp]
  const float* bias;
  float* y;
};

inline void store_wo(const WoArgs& t, int64_t r, int64_t col0, __m512 v) {
  const __mmask16 m = tail_mask(t.w.n - col0);
  if (t.bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, t.bias + col0));
  _mm512_mask_storeu_ps(t.y + r * t.w.n + col0, m, v);
}

/// acc[r][p] += x[r][k0 + J] * wf[p].
template <int MR, int P, int J>
__attribute__((always_inline)) inline void fma_values(const float* const* xr, int64_t k0, const __m512 (&wf)[P],
                                                      __m512 (&acc)[MR][P]) {
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
    const __m512 xv = _mm512_set1_ps(xr[r][k0 + J]);
    HF2PTE_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(xv, wf[p], acc[r][p]);
  }
}

/// acc[r][p] += x[r][k0 + J] * column values in byte J of `v[p]` (int8 panels).
template <int MR, int P, int J>
__attribute__((always_inline)) inline void fma_byte(const float* const* xr, int64_t k0, const __m512i (&v)[P], __m512 (&acc)[MR][P]) {
  __m512 wf[P];
  HF2PTE_UNROLL for (int p = 0; p < P; ++p) wf[p] = byte_lane<J>(v[p]);
  fma_values<MR, P, J>(xr, k0, wf, acc);
}

/// acc[r][p] += x[r][k0 + J] * column values in nibble I of `v[p]` (int4
/// panels; J is I's k offset: I / 2, + 4 for high nibbles).
template <int MR, int P, int I>
__attribute__((always_inline)) inline void fma_nibble(const float* const* xr, int64_t k0, const __m512i (&v)[P],
                                                      __m512 table, __m512 (&acc)[MR][P]) {
  __m512 wf[P];
  HF2PTE_UNROLL for (int p = 0; p < P; ++p) wf[p] = nibble_lane<I>(v[p], table);
  fma_values<MR, P, I / 2 + (I % 2) * 4>(xr, k0, wf, acc);
}

template <int MR, int P>
__attribute__((always_inline)) inline void fma_word(const float* const* xr, int64_t k0, const __m512i (&v)[P], __m512 (&acc)[MR][P]) {
  fma_byte<MR, P, 0>(xr, k0, v, acc);
  fma_byte<MR, P, 1>(xr, k0, v, acc);
  fma_byte<MR, P, 2>(xr, k0, v, acc);
  fma_byte<MR, P, 3>(xr, k0, v, acc);
}

/// The eight k of one int4 word, in k order (the order the byte path summed them).
template <int MR, int P>
__attribute__((always_inline)) inline void fma_nibble_word(const float* const* xr, int64_t k0, const __m512i (&v)[P],
                                                           __m512 table, __m512 (&acc)[MR][P]) {
  fma_nibble<MR, P, 0>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 2>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 4>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 6>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 1>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 3>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 5>(xr, k0, v, table, acc);
  fma_nibble<MR, P, 7>(xr, k0, v, table, acc);
}

/// Weight-only tile over k range [k0, k1) of a run (int8 panel, int4 panel or one int4 block).
template <int MR, int P>
__attribute__((always_inline)) inline void wo_run(const WoArgs& t, const uint8_t* wp, const float* const* xr, int64_t k0, int64_t k1,
                   __m512 (&acc)[MR][P]) {
  if (t.w.kind == QFilterKind::kInt8) {
    for (int64_t kk = k0; kk < k1; kk += 4) {
      __m512i v[P];
      HF2PTE_UNROLL for (int p = 0; p < P; ++p) v[p] = _mm512_loadu_si512(wp + p * t.w.panel_bytes + (kk - k0) * 16);
      fma_word<MR, P>(xr, kk, v, acc);
    }
  } else {
    const __m512 table = nibble_table();
    for (int64_t kk = k0; kk < k1; kk += 8) {
      __m512i v[P];
      HF2PTE_UNROLL for (int p = 0; p < P; ++p) v[p] = _mm512_loadu_si512(wp + p * t.w.panel_bytes + (kk - k0) * 8);
      fma_nibble_word<MR, P>(xr, kk, v, table, acc);
    }
  }
}

template <int MR, int P>
void tile_wo(const WoArgs& t, int64_t m0, int64_t p0) {
  const float* xr[MR];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) xr[r] = t.x + (m0 + r) * t.w.kp;
  const uint8_t* wp = t.w.data.data() + p0 * t.w.panel_bytes;
  __m512 acc[MR][P];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) HF2PTE_UNROLL for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  if (t.w.kind != QFilterKind::kInt4Block) {
    wo_run<MR, P>(t, wp, xr, 0, t.w.kp, acc);
    HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
      const int64_t col0 = (p0 + p) * kQPanel;
      const __m512 ws = _mm512_loadu_ps(t.w.scale.data() + col0);
      HF2PTE_UNROLL for (int r = 0; r < MR; ++r) store_wo(t, m0 + r, col0, _mm512_mul_ps(acc[r][p], ws));
    }
    return;
  }
  const int64_t g = t.w.group, block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  for (int64_t b = 0; b < t.w.nblocks(); ++b) {
    __m512 bacc[MR][P];
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) HF2PTE_UNROLL for (int p = 0; p < P; ++p) bacc[r][p] = _mm512_setzero_ps();
    const uint8_t* wb = wp + b * block_bytes;
    wo_run<MR, P>(t, wb, xr, b * g, (b + 1) * g, bacc);
    HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
      const __m512 sc = load_bf16x16(wb + p * t.w.panel_bytes + kQPanel * g / 2);
      HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r][p] = _mm512_fmadd_ps(bacc[r][p], sc, acc[r][p]);
    }
  }
  HF2PTE_UNROLL for (int p = 0; p < P; ++p) {
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) store_wo(t, m0 + r, (p0 + p) * kQPanel, acc[r][p]);
  }
}

// Decode, weight-only: one panel, one stream; the four bytes of a lane (and
// for int4 the low and high nibbles) feed separate accumulators so the FMA
// chains overlap, summed in a fixed tree at the end.
inline __m512 sum8(const __m512 (&a)[8]) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])),
                       _mm512_add_ps(_mm512_add_ps(a[4], a[5]), _mm512_add_ps(a[6], a[7])));
}

/// a[S + j] += x[kk + j] * byte j of each lane of v (one int8 word, 4 k).
template <int S>
__attribute__((always_inline)) inline void gemv_int8_word(__m512i v, const float* x, int64_t kk, __m512 (&a)[8]) {
  a[S + 0] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 0]), byte_lane<0>(v), a[S + 0]);
  a[S + 1] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 1]), byte_lane<1>(v), a[S + 1]);
  a[S + 2] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 2]), byte_lane<2>(v), a[S + 2]);
  a[S + 3] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 3]), byte_lane<3>(v), a[S + 3]);
}

// The GEMV runs below are inlined, with constant indices into a[], so the
// accumulators stay in registers (across an int4 filter's blocks too).
__attribute__((always_inline)) inline void gemv_int8_run(const uint8_t* wp, const float* x, int64_t k0, int64_t k1,
                                                         __m512 (&a)[8]) {
  // Even words (k / 4) into a[0..3], odd ones into a[4..7].
  int64_t kk = k0;
  for (; kk + 8 <= k1; kk += 8) {
    gemv_int8_word<0>(_mm512_loadu_si512(wp + (kk - k0) * 16), x, kk, a);
    gemv_int8_word<4>(_mm512_loadu_si512(wp + (kk - k0) * 16 + 64), x, kk + 4, a);
  }
  if (kk < k1) gemv_int8_word<0>(_mm512_loadu_si512(wp + (kk - k0) * 16), x, kk, a);
}

__attribute__((always_inline)) inline void gemv_int4_run(const uint8_t* wp, const float* x, int64_t k0, int64_t k1,
                                                         __m512 table, __m512 (&a)[8]) {
  for (int64_t kk = k0; kk < k1; kk += 8) {
    __m512i v = _mm512_loadu_si512(wp + (kk - k0) * 8);
    // One load into a register: GCC otherwise folds the load into each of
    // the seven shifts, and the loads, not the arithmetic, set the pace.
    asm("" : "+v"(v));
    a[0] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 0]), nibble_lane<0>(v, table), a[0]);
    a[1] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 1]), nibble_lane<2>(v, table), a[1]);
    a[2] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 2]), nibble_lane<4>(v, table), a[2]);
    a[3] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 3]), nibble_lane<6>(v, table), a[3]);
    a[4] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 4]), nibble_lane<1>(v, table), a[4]);
    a[5] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 5]), nibble_lane<3>(v, table), a[5]);
    a[6] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 6]), nibble_lane<5>(v, table), a[6]);
    a[7] = _mm512_fmadd_ps(_mm512_set1_ps(x[kk + 7]), nibble_lane<7>(v, table), a[7]);
  }
}

void gemv_wo(const WoArgs& t, int64_t p) {
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  const int64_t col0 = p * kQPanel;
  const __m512 table = nibble_table();
  __m512 a[8];
  HF2PTE_UNROLL for (int i = 0; i < 8; ++i) a[i] = _mm512_setzero_ps();
  if (t.w.kind != QFilterKind::kInt4Block) {
    if (t.w.kind == QFilterKind::kInt8) {
      gemv_int8_run(wp, t.x, 0, t.w.kp, a);
    } else {
      gemv_int4_run(wp, t.x, 0, t.w.kp, table, a);
    }
    store_wo(t, 0, col0, _mm512_mul_ps(sum8(a), _mm512_loadu_ps(t.w.scale.data() + col0)));
    return;
  }
  const int64_t g = t.w.group, block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < t.w.nblocks(); ++b) {
    const uint8_t* wb = wp + b * block_bytes;
    HF2PTE_UNROLL for (int i = 0; i < 8; ++i) a[i] = _mm512_setzero_ps();
    gemv_int4_run(wb, t.x, b * g, (b + 1) * g, table, a);
    acc = _mm512_fmadd_ps(sum8(a), load_bf16x16(wb + kQPanel * g / 2), acc);
  }
  store_wo(t, 0, col0, acc);
}

template <int P>
void run_wo_rows(const WoArgs& t, int64_t m0, int64_t mr, int64_t p0) {
  switch (mr) {
    case 1: tile_wo<1, P>(t, m0, p0); break;
    case 2: tile_wo<2, P>(t, m0, p0); break;
    case 3: tile_wo<3, P>(t, m0, p0); break;
    default: tile_wo<4, P>(t, m0, p0); break;
  }
}

void weight_only_panels(const QFilter& w, const float* xp, int64_t m, const float* bias, float* y, int64_t p0,
                        int64_t p1) {
  const WoArgs t{w, xp, bias, y};
  if (m == 1) {
    for (int64_t p = p0; p < p1; ++p) gemv_wo(t, p);
    return;
  }
  for (int64_t p = p0; p < p1; p += kP) {
    const int64_t np = std::min<int64_t>(kP, p1 - p);
    for (int64_t m0 = 0; m0 < m; m0 += kMR) {
      const int64_t mr = std::min<int64_t>(kMR, m - m0);
      if (np == kP) {
        run_wo_rows<kP>(t, m0, mr, p);
      } else {
        run_wo_rows<1>(t, m0, mr, p);
      }
    }
  }
}

}  // namespace

const QGemmKernels kQGemm{"avx512vnni", false, quantize_rows, dynamic_panels, weight_only_panels};
}  // namespace avx512vnni

}  // namespace hf2pte::kernels
