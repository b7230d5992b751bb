// AVX2 versions of the quantized-filter kernels (qgemm.h), for x86 CPUs
// without AVX-512 VNNI. This file is part of the hf2pte_kernels_optimized_avx2
// library, compiled with -mavx2 -mfma -mf16c; qgemm.cpp calls it only when
// __builtin_cpu_supports says the CPU has them.
//
// The packed panels are the VNNI kernels' (16 columns, 64-byte steps); AVX2
// reads a step as two 8-column halves. There is no vpdpbusd, and
// vpmaddubsw's int16 pair sums can saturate, so each product is exact by
// construction:
//  - int8 filters: weights and activations (q + 128) widened to int16,
//    vpmaddwd sums pairs into int32 ((255 * 128) * 2 < 2^31);
//  - int4 filters: vpmaddubsw of the stored nibble (0..15) with the signed q
//    (|pair| <= 2 * 15 * 128 = 3840), up to 16 products per int16 lane
//    (30720 < 2^15) before vpmaddwd with ones widens them to int32.
// The integer parts are exact; the float steps follow the VNNI kernels'
// order (one rounding per step), so both ISAs agree to the last bit on
// channel kinds and within fp32 rounding on blocks.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/optimized/qgemm.h"

#define HF2PTE_UNROLL _Pragma("GCC unroll 16")

namespace hf2pte::kernels {

namespace avx2 {
namespace {

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m256i bcast_i32(const uint8_t* p) { return _mm256_set1_epi32(load_i32(p)); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m128i load64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

/// Lane mask of the first min(left, 8) lanes (left > 0).
inline __m256i tail_mask(int64_t left) {
  alignas(32) static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - std::min<int64_t>(left, 8)));
}

/// 8 bf16 values as floats.
inline __m256 load_bf16x8(const uint8_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}

/// Four activation bytes widened to int16, [a0 a1 a2 a3] repeated over 16 lanes.
inline __m256i act_x4_i16(const uint8_t* p) {
  return _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(load_i32(p))));
}

/// int8 step, 4 columns (16 bytes = [4 cols][4 k]) against act_x4_i16:
/// int32 lanes (col, k pair) = w[c][2j] a[2j] + w[c][2j+1] a[2j+1].
inline __m256i dot_int8_x4(const uint8_t* w, __m256i a) { return _mm256_madd_epi16(_mm256_cvtepi8_epi16(load128(w)), a); }

/// Folds two (col, k pair) accumulators of columns 0-3 and 4-7 into the 8 column sums.
inline __m256i fold_pairs(__m256i c03, __m256i c47) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(c03, c47), _MM_SHUFFLE(3, 1, 2, 0));
}

/// int4 step, one 8-column half (32 bytes = [8 cols][4 bytes]) against the
/// q bytes of k 8t..8t+3 (a0) and 8t+4..8t+7 (a1): int16 lanes (col, pair).
inline __m256i dot_int4_x8(const uint8_t* w, __m256i a0, __m256i a1) {
  const __m256i m = _mm256_set1_epi8(0x0F);
  const __m256i v = load256(w);
  const __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
  return _mm256_add_epi16(_mm256_maddubs_epi16(lo, a0), _mm256_maddubs_epi16(hi, a1));
}
inline __m256i widen16(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

/// int16 lanes hold at most this many int4 steps (4 products each, |p| <= 1920).
constexpr int64_t kInt4StepsPer16 = 4;

constexpr int64_t kPrefetchBytes = 1024;
inline void prefetch_ahead(const uint8_t* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + off), _MM_HINT_T0);
  }
}

// ---- activation quantization (the generic kernel's rules, 8 lanes) ----

void quantize_rows(const float* x, int64_t k, const float* inv, QFilterKind kind, int64_t group, QActs& a, int64_t r0,
                   int64_t r1) {
  const bool shift = kind == QFilterKind::kInt8;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * k;
    float inv_scale;
    if (inv == nullptr) {
      __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
      for (int64_t i = 0; i < k; i += 8) {
        const __m256 v = _mm256_maskload_ps(xr + i, tail_mask(k - i));  // 0 beyond k: no effect on the range
        // min/max(v, acc) keep acc where v is NaN, as std::min(acc, v) does.
        lo = _mm256_min_ps(v, lo);
        hi = _mm256_max_ps(v, hi);
      }
      alignas(32) float l[8], h[8];
      _mm256_store_ps(l, lo);
      _mm256_store_ps(h, hi);
      float lmin = l[0], hmax = h[0];
      for (int j = 1; j < 8; ++j) {
        lmin = std::min(lmin, l[j]);
        hmax = std::max(hmax, h[j]);
      }
      float zp;
      qparams_from_range(lmin, hmax, &a.scale[size_t(r)], &inv_scale, &zp);
      a.zp[size_t(r)] = int32_t(zp);
    } else {
      inv_scale = inv[r];
    }
    const __m256 vinv = _mm256_set1_ps(inv_scale), vzp = _mm256_set1_ps(float(a.zp[size_t(r)]));
    const __m256 qlo = _mm256_set1_ps(-128.0f), qhi = _mm256_set1_ps(127.0f);
    uint8_t* qr = a.q.data() + r * a.kp;
    __m256i total = _mm256_setzero_si256();
    for (int64_t i = 0; i < k; i += 8) {
      const __m256i m = tail_mask(k - i);
      const __m256 v = _mm256_maskload_ps(xr + i, m);
      __m256 q = _mm256_add_ps(_mm256_round_ps(_mm256_mul_ps(v, vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vzp);
      q = _mm256_min_ps(_mm256_max_ps(q, qlo), qhi);
      const __m256i qi = _mm256_and_si256(_mm256_cvtps_epi32(q), m);
      total = _mm256_add_epi32(total, qi);
      const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
      __m128i b = _mm_packs_epi16(w16, w16);
      if (shift) b = _mm_xor_si128(b, _mm_set1_epi8(char(0x80)));
      if (k - i >= 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(qr + i), b);
      } else {
        alignas(16) uint8_t tmp[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b);
        std::memcpy(qr + i, tmp, size_t(k - i));
      }
    }
    for (int64_t i = k; i < a.kp; ++i) qr[i] = shift ? 128 : 0;
    if (!a.q16.empty()) {  // int8 filters, GEMM: q + 128 widened once instead of once per panel
      uint16_t* wr = a.q16.data() + r * a.kp;
      int64_t i = 0;
      for (; i + 16 <= a.kp; i += 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(wr + i), _mm256_cvtepu8_epi16(load128(qr + i)));
      }
      for (; i < a.kp; ++i) wr[i] = qr[i];
    }
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), total);
    a.qsum[size_t(r)] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    for (int64_t b = 0; b < a.nblocks; ++b) {  // blocks are multiples of 8
      __m256i s = _mm256_setzero_si256();
      for (int64_t i = b * group; i < (b + 1) * group; i += 8) s = _mm256_add_epi32(s, _mm256_cvtepi8_epi32(load64(qr + i)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
      a.bsum[size_t(r * a.nblocks + b)] = -8 * (((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7])));
    }
  }
}

// ---- dynamic quantization ----

struct TileArgs {
  const QFilter& w;
  const QActs& a;
  const float* bias;
  float* y;
};

/// Columns col0 .. col0 + 7 of row r (those below n), plus the bias; for the
/// dynamic (TileArgs) and the weight-only (WoArgs) kernels alike.
template <class Args>
inline void store_out(const Args& t, int64_t r, int64_t col0, __m256 v) {
  if (col0 >= t.w.n) return;
  const __m256i m = tail_mask(t.w.n - col0);
  if (t.bias != nullptr) v = _mm256_add_ps(v, _mm256_maskload_ps(t.bias + col0, m));
  _mm256_maskstore_ps(t.y + r * t.w.n + col0, m, v);
}

/// Per-channel epilogue of 8 columns: y = float(acc - corr) * (x_scale * w_scale).
inline void channel_out(const TileArgs& t, int64_t row, int64_t col0, __m256i acc) {
  const int32_t zp = t.a.zp[size_t(row)];
  const __m256i wsum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.w.wsum.data() + col0));
  __m256i d;
  if (t.w.kind == QFilterKind::kInt8) {
    d = _mm256_sub_epi32(acc, _mm256_mullo_epi32(wsum, _mm256_set1_epi32(128 + zp)));
  } else {
    d = _mm256_sub_epi32(acc, _mm256_add_epi32(_mm256_set1_epi32(8 * t.a.qsum[size_t(row)]),
                                                _mm256_mullo_epi32(wsum, _mm256_set1_epi32(zp))));
  }
  const __m256 s = _mm256_mul_ps(_mm256_set1_ps(t.a.scale[size_t(row)]), _mm256_loadu_ps(t.w.scale.data() + col0));
  store_out(t, row, col0, _mm256_mul_ps(_mm256_cvtepi32_ps(d), s));
}

/// Block epilogue of 8 columns: y = x_scale * (facc - zp * wsumf).
inline void block_out(const TileArgs& t, int64_t row, int64_t col0, __m256 facc) {
  const __m256 v = _mm256_fnmadd_ps(_mm256_set1_ps(float(t.a.zp[size_t(row)])), _mm256_loadu_ps(t.w.wsumf.data() + col0), facc);
  store_out(t, row, col0, _mm256_mul_ps(_mm256_set1_ps(t.a.scale[size_t(row)]), v));
}

/// int4 dot products over steps [s0, s1) of 8 k (step s at w + 64 s + 32 h,
/// q at q + 8 s) for both halves, int16 partials flushed every kInt4StepsPer16.
inline void int4_run(const uint8_t* w, const uint8_t* q, int64_t s0, int64_t s1, __m256i* acc0, __m256i* acc1) {
  for (int64_t s = s0; s < s1; s += kInt4StepsPer16) {
    __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
    for (int64_t j = s; j < std::min(s1, s + kInt4StepsPer16); ++j) {
      const __m256i a0 = bcast_i32(q + 8 * j), a1 = bcast_i32(q + 8 * j + 4);
      p0 = _mm256_add_epi16(p0, dot_int4_x8(w + 64 * j, a0, a1));
      p1 = _mm256_add_epi16(p1, dot_int4_x8(w + 64 * j + 32, a0, a1));
    }
    *acc0 = _mm256_add_epi32(*acc0, widen16(p0));
    *acc1 = _mm256_add_epi32(*acc1, widen16(p1));
  }
}

// Decode (one row): one panel at a time, its weights one sequential stream.
void gemv_dq_int8(const TileArgs& t, int64_t p) {
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  const uint8_t* q = t.a.q.data();
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int64_t kk = 0; kk < t.w.kp; kk += 4) {
    const uint8_t* step = wp + kk * 16;
    if (kk % 16 == 0) prefetch_ahead(step, 256);
    const __m256i a = act_x4_i16(q + kk);
    HF2PTE_UNROLL for (int i = 0; i < 4; ++i) acc[i] = _mm256_add_epi32(acc[i], dot_int8_x4(step + 16 * i, a));
  }
  channel_out(t, 0, p * kQPanel, fold_pairs(acc[0], acc[1]));
  channel_out(t, 0, p * kQPanel + 8, fold_pairs(acc[2], acc[3]));
}

void gemv_dq_int4(const TileArgs& t, int64_t p) {
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  const int64_t steps = t.w.kp / 8;
  for (int64_t s = 0; s < steps; s += 8) {
    prefetch_ahead(wp + 64 * s, 512);
    int4_run(wp, t.a.q.data(), s, std::min(steps, s + 8), &acc0, &acc1);
  }
  channel_out(t, 0, p * kQPanel, acc0);
  channel_out(t, 0, p * kQPanel + 8, acc1);
}

// Blocks: the block's integer sum (exact), then one fmadd with its 8 + 8
// scales, alternating two float accumulators (even / odd blocks) as the
// VNNI kernel does.
void gemv_dq_int4_block(const TileArgs& t, int64_t p) {
  const int64_t g = t.w.group, nb = t.w.nblocks();
  const int64_t block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  const uint8_t* wb = t.w.data.data() + p * t.w.panel_bytes;
  const uint8_t* q = t.a.q.data();
  __m256 f[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
  for (int64_t b = 0; b < nb; ++b, wb += block_bytes, q += g) {
    prefetch_ahead(wb, block_bytes);
    __m256i acc0 = _mm256_set1_epi32(t.a.bsum[size_t(b)]), acc1 = acc0;
    int4_run(wb, q, 0, g / 8, &acc0, &acc1);
    const uint8_t* sc = wb + kQPanel * g / 2;
    __m256(&fb)[2] = f[b % 2];
    fb[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc0), load_bf16x8(sc), fb[0]);
    fb[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc1), load_bf16x8(sc + 16), fb[1]);
  }
  block_out(t, 0, p * kQPanel, _mm256_add_ps(f[0][0], f[1][0]));
  block_out(t, 0, p * kQPanel + 8, _mm256_add_ps(f[0][1], f[1][1]));
}

// Prefill tiles: MR rows x one 8-column half h of panel p, the whole k. The
// int8 tile reads the activations pre-widened (QActs::q16): one broadcast per
// row and step.
template <int MR>
void tile_dq_int8(const TileArgs& t, int64_t m0, int64_t p, int h) {
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes + 32 * h;
  const uint16_t* ar = t.a.q16.data() + m0 * t.a.kp;
  __m256i acc[MR][2];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t kk = 0; kk < t.w.kp; kk += 4) {
    const __m256i w0 = _mm256_cvtepi8_epi16(load128(wp + kk * 16)), w1 = _mm256_cvtepi8_epi16(load128(wp + kk * 16 + 16));
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      const __m256i a = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ar + r * t.a.kp + kk)));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(w0, a));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(w1, a));
    }
  }
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) channel_out(t, m0 + r, p * kQPanel + 8 * h, fold_pairs(acc[r][0], acc[r][1]));
}

/// int32 sums of one half over steps [s0, s1) for MR rows (int16 partials per kInt4StepsPer16 steps).
template <int MR>
inline void int4_tile_run(const uint8_t* w, const uint8_t* ar, int64_t lda, int64_t s0, int64_t s1, __m256i (&acc)[MR]) {
  for (int64_t s = s0; s < s1; s += kInt4StepsPer16) {
    __m256i part[MR];
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) part[r] = _mm256_setzero_si256();
    for (int64_t j = s; j < std::min(s1, s + kInt4StepsPer16); ++j) {
      const __m256i m = _mm256_set1_epi8(0x0F);
      const __m256i v = load256(w + 64 * j);
      const __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
      HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
        const uint8_t* q = ar + r * lda + 8 * j;
        part[r] = _mm256_add_epi16(part[r], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast_i32(q)),
                                                             _mm256_maddubs_epi16(hi, bcast_i32(q + 4))));
      }
    }
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r] = _mm256_add_epi32(acc[r], widen16(part[r]));
  }
}

template <int MR>
void tile_dq_int4(const TileArgs& t, int64_t m0, int64_t p, int h) {
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes + 32 * h;
  __m256i acc[MR];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_si256();
  int4_tile_run<MR>(wp, t.a.q.data() + m0 * t.a.kp, t.a.kp, 0, t.w.kp / 8, acc);
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) channel_out(t, m0 + r, p * kQPanel + 8 * h, acc[r]);
}

template <int MR>
void tile_dq_int4_block(const TileArgs& t, int64_t m0, int64_t p, int h) {
  const int64_t g = t.w.group, nb = t.w.nblocks();
  const int64_t block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  __m256 facc[MR];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) facc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i acc[MR];
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r] = _mm256_set1_epi32(t.a.bsum[size_t((m0 + r) * nb + b)]);
    const uint8_t* wb = wp + b * block_bytes;
    int4_tile_run<MR>(wb + 32 * h, t.a.q.data() + m0 * t.a.kp + b * g, t.a.kp, 0, g / 8, acc);
    const __m256 sc = load_bf16x8(wb + kQPanel * g / 2 + 16 * h);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) facc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r]), sc, facc[r]);
  }
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) block_out(t, m0 + r, p * kQPanel + 8 * h, facc[r]);
}

/// Rows per tile: int8 tiles hold 2 accumulators per row (6 rows: 12 of the 16
/// registers), int4 tiles 2 per row with their int16 partials (4 rows).
constexpr int kMRInt8 = 6;
constexpr int kMRInt4 = 4;

template <int MR>
void run_dq_tile(const TileArgs& t, int64_t m0, int64_t p, int h) {
  switch (t.w.kind) {
    case QFilterKind::kInt8: tile_dq_int8<MR>(t, m0, p, h); break;
    case QFilterKind::kInt4: tile_dq_int4<MR>(t, m0, p, h); break;
    case QFilterKind::kInt4Block: tile_dq_int4_block<MR>(t, m0, p, h); break;
  }
}

template <int MR>
void run_dq_rows(const TileArgs& t, int64_t m0, int64_t mr, int64_t p, int h) {
  if constexpr (MR > 1) {
    if (mr < MR) return run_dq_rows<MR - 1>(t, m0, mr, p, h);
  }
  run_dq_tile<MR>(t, m0, p, h);
}

void dynamic_panels(const QFilter& w, const QActs& a, const float* bias, float* y, int64_t p0, int64_t p1) {
  const TileArgs t{w, a, bias, y};
  if (a.m == 1) {
    auto one = [&](int64_t p) {
      switch (w.kind) {
        case QFilterKind::kInt8: gemv_dq_int8(t, p); break;
        case QFilterKind::kInt4: gemv_dq_int4(t, p); break;
        case QFilterKind::kInt4Block: gemv_dq_int4_block(t, p); break;
      }
    };
    // Two panel streams at once (the two halves of the range, alternately), as the VNNI kernel reads them.
    const int64_t half = (p1 - p0 + 1) / 2;
    for (int64_t i = 0; i < half; ++i) {
      one(p0 + i);
      if (p0 + half + i < p1) one(p0 + half + i);
    }
    return;
  }
  // Row blocks outermost: a block's activations (48 rows) stay in L2 while
  // the panels stream past them; rows innermost would re-read all of them
  // from L3 for every half-panel.
  constexpr int64_t kRowBlock = 48;
  const int64_t mr = w.kind == QFilterKind::kInt8 ? kMRInt8 : kMRInt4;
  for (int64_t mb = 0; mb < a.m; mb += kRowBlock) {
    const int64_t me = std::min(a.m, mb + kRowBlock);
    for (int64_t p = p0; p < p1; ++p) {
      for (int h = 0; h < 2 && p * kQPanel + 8 * h < w.n; ++h) {
        for (int64_t m0 = mb; m0 < me; m0 += mr) {
          if (w.kind == QFilterKind::kInt8) {
            run_dq_rows<kMRInt8>(t, m0, std::min(mr, me - m0), p, h);
          } else {
            run_dq_rows<kMRInt4>(t, m0, std::min(mr, me - m0), p, h);
          }
        }
      }
    }
  }
}

// ---- weight-only (fp32 activations) ----
//
// Eight accumulators per panel, one per column pair: lanes (col, k mod 4),
// fed by 8 bytes = [2 cols][4 k] sign-extended to floats and the matching
// four x values repeated; folded to column sums at the end.

/// The 8 column sums of pair accumulators c01, c23, c45, c67.
inline __m256 fold_quads(__m256 c01, __m256 c23, __m256 c45, __m256 c67) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(c01, c23), _mm256_hadd_ps(c45, c67));  // [c0 c2 c4 c6 | c1 c3 c5 c7]
  return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline __m256 x_quad(const float* x) { return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(x)); }
inline __m256 bytes_to_floats(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/// acc[i] += column pair i's values over k range [k0, k1) of a run at wp.
inline void wo_run(const QFilter& w, const uint8_t* wp, const float* x, int64_t k0, int64_t k1, __m256 (&acc)[8]) {
  if (w.kind == QFilterKind::kInt8) {
    for (int64_t kk = k0; kk < k1; kk += 4) {
      const uint8_t* step = wp + (kk - k0) * 16;
      const __m256 xv = x_quad(x + kk);
      HF2PTE_UNROLL for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(bytes_to_floats(load64(step + 8 * i)), xv, acc[i]);
    }
    return;
  }
  const __m256i m = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  for (int64_t kk = k0; kk < k1; kk += 8) {
    const uint8_t* step = wp + (kk - k0) * 8;
    const __m256 xlo = x_quad(x + kk), xhi = x_quad(x + kk + 4);
    HF2PTE_UNROLL for (int h = 0; h < 2; ++h) {
      const __m256i v = load256(step + 32 * h);
      const __m256i lo = _mm256_sub_epi8(_mm256_and_si256(v, m), eight);
      const __m256i hi = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(v, 4), m), eight);
      const __m128i l0 = _mm256_castsi256_si128(lo), l1 = _mm256_extracti128_si256(lo, 1);
      const __m128i h0 = _mm256_castsi256_si128(hi), h1 = _mm256_extracti128_si256(hi, 1);
      __m256* a = acc + 4 * h;
      a[0] = _mm256_fmadd_ps(bytes_to_floats(h0), xhi, _mm256_fmadd_ps(bytes_to_floats(l0), xlo, a[0]));
      a[1] = _mm256_fmadd_ps(bytes_to_floats(_mm_srli_si128(h0, 8)), xhi,
                             _mm256_fmadd_ps(bytes_to_floats(_mm_srli_si128(l0, 8)), xlo, a[1]));
      a[2] = _mm256_fmadd_ps(bytes_to_floats(h1), xhi, _mm256_fmadd_ps(bytes_to_floats(l1), xlo, a[2]));
      a[3] = _mm256_fmadd_ps(bytes_to_floats(_mm_srli_si128(h1, 8)), xhi,
                             _mm256_fmadd_ps(bytes_to_floats(_mm_srli_si128(l1, 8)), xlo, a[3]));
    }
  }
}

struct WoArgs {
  const QFilter& w;
  const float* x;  ///< [m][kp]
  const float* bias;
  float* y;
};

/// Row r of panel p.
void gemv_wo(const WoArgs& t, int64_t r, int64_t p) {
  const uint8_t* wp = t.w.data.data() + p * t.w.panel_bytes;
  const float* x = t.x + r * t.w.kp;
  const int64_t col0 = p * kQPanel;
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  if (t.w.kind != QFilterKind::kInt4Block) {
    wo_run(t.w, wp, x, 0, t.w.kp, a);
    store_out(t, r, col0, _mm256_mul_ps(fold_quads(a[0], a[1], a[2], a[3]), _mm256_loadu_ps(t.w.scale.data() + col0)));
    store_out(t, r, col0 + 8, _mm256_mul_ps(fold_quads(a[4], a[5], a[6], a[7]), _mm256_loadu_ps(t.w.scale.data() + col0 + 8)));
    return;
  }
  const int64_t g = t.w.group, block_bytes = kQPanel * g / 2 + 2 * kQPanel;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t b = 0; b < t.w.nblocks(); ++b) {
    const uint8_t* wb = wp + b * block_bytes;
    for (auto& v : a) v = _mm256_setzero_ps();
    wo_run(t.w, wb, x, b * g, (b + 1) * g, a);
    const uint8_t* sc = wb + kQPanel * g / 2;
    acc0 = _mm256_fmadd_ps(fold_quads(a[0], a[1], a[2], a[3]), load_bf16x8(sc), acc0);
    acc1 = _mm256_fmadd_ps(fold_quads(a[4], a[5], a[6], a[7]), load_bf16x8(sc + 16), acc1);
  }
  store_out(t, r, col0, acc0);
  store_out(t, r, col0 + 8, acc1);
}

/// Half h of panel p as floats, deq[k * 8 + c] = value (times its block's
/// scale for kInt4Block), in the kernel's panel layout (qgemm.h).
void dequantize_half(const QFilter& w, int64_t p, int h, float* deq) {
  const uint8_t* panel = w.data.data() + p * w.panel_bytes;
  const int64_t block_bytes = kQPanel * w.group / 2 + 2 * kQPanel;
  for (int64_t k = 0; k < w.kp; ++k) {
    for (int c = 0; c < 8; ++c) {
      const int64_t col = 8 * h + c;
      float v;
      if (w.kind == QFilterKind::kInt8) {
        v = float(int8_t(panel[(k / 4) * 64 + col * 4 + k % 4]));
      } else {
        const uint8_t* run = panel;
        int64_t local = k;
        if (w.kind == QFilterKind::kInt4Block) {
          run += (k / w.group) * block_bytes;
          local = k % w.group;
        }
        const uint8_t b = run[(local / 8) * 64 + col * 4 + (local % 8) % 4];
        v = float(int((local % 8) >= 4 ? b >> 4 : b & 0xF) - 8);
        if (w.kind == QFilterKind::kInt4Block) {
          uint16_t bits;
          std::memcpy(&bits, run + kQPanel * w.group / 2 + 2 * col, 2);
          const uint32_t u = uint32_t(bits) << 16;
          float sc;
          std::memcpy(&sc, &u, 4);
          v *= sc;
        }
      }
      deq[k * 8 + c] = v;
    }
  }
}

/// Rows m0 .. m0 + MR of one 8-column half against its dequantized floats.
template <int MR>
void tile_wo_f32(const WoArgs& t, const float* deq, int64_t m0, int64_t col0) {
  __m256 acc[MR];
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  const float* x = t.x + m0 * t.w.kp;
  for (int64_t k = 0; k < t.w.kp; ++k) {
    const __m256 wv = _mm256_loadu_ps(deq + k * 8);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r * t.w.kp + k]), wv, acc[r]);
  }
  const bool channel = t.w.kind != QFilterKind::kInt4Block;
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
    store_out(t, m0 + r, col0, channel ? _mm256_mul_ps(acc[r], _mm256_loadu_ps(t.w.scale.data() + col0)) : acc[r]);
  }
}

template <int MR>
void run_wo_rows(const WoArgs& t, const float* deq, int64_t m0, int64_t mr, int64_t col0) {
  if constexpr (MR > 1) {
    if (mr < MR) return run_wo_rows<MR - 1>(t, deq, m0, mr, col0);
  }
  tile_wo_f32<MR>(t, deq, m0, col0);
}

// Decode: the streaming loop per panel. GEMM: each half-panel dequantized
// once into floats (kp x 8, in L1/L2), then 6-row FMA tiles over it.
void weight_only_panels(const QFilter& w, const float* xp, int64_t m, const float* bias, float* y, int64_t p0,
                        int64_t p1) {
  const WoArgs t{w, xp, bias, y};
  if (m == 1) {
    for (int64_t p = p0; p < p1; ++p) gemv_wo(t, 0, p);
    return;
  }
  constexpr int64_t kRows = 6;
  std::vector<float> deq(size_t(w.kp * 8));
  for (int64_t p = p0; p < p1; ++p) {
    for (int h = 0; h < 2 && p * kQPanel + 8 * h < w.n; ++h) {
      dequantize_half(w, p, h, deq.data());
      for (int64_t m0 = 0; m0 < m; m0 += kRows) run_wo_rows<kRows>(t, deq.data(), m0, std::min(kRows, m - m0), p * kQPanel + 8 * h);
    }
  }
}

}  // namespace

const QGemmKernels kQGemm{"avx2", true, quantize_rows, dynamic_panels, weight_only_panels};
}  // namespace avx2

}  // namespace hf2pte::kernels
