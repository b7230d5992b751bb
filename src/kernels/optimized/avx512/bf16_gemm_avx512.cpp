// The AVX-512 BF16 GEMM block of bf16_gemm.h (built with -mavx512bf16; called
// only on CPUs that report it).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "kernels/optimized/bf16_gemm.h"

// The row loops must unroll so the accumulators live in registers.
#define HF2PTE_UNROLL _Pragma("GCC unroll 16")

namespace hf2pte::kernels::avx512bf16 {

namespace {

constexpr int64_t kNr = 32;   // columns per panel: two zmm accumulators per row
constexpr int kMr = 8;        // rows per micro-tile: 16 accumulators
constexpr int64_t kKc = 256;  // k per block: a panel is kKc * kNr * 2 bytes = 16 KiB

uint16_t* scratch(size_t n) {
  thread_local std::unique_ptr<uint16_t[]> buf;
  thread_local size_t cap = 0;
  if (n > cap) buf = std::make_unique_for_overwrite<uint16_t[]>(n), cap = n;
  return buf.get();
}

__mmask32 column_mask(int64_t cols) { return cols >= 32 ? ~__mmask32(0) : (__mmask32(1) << cols) - 1; }

/// B[0..kc, 0..n) (row stride ldb) into panels of kNr columns, each
/// [kc/2][kNr][2]: rows 2t and 2t+1 of a column side by side. Padding columns are zero.
void pack_b(const uint16_t* B, int64_t ldb, int64_t kc, int64_t n, uint16_t* out) {
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int64_t n0 = 0; n0 < n; n0 += kNr) {
    const __mmask32 m = column_mask(n - n0);
    for (int64_t t = 0; t < kc / 2; ++t) {
      const __m512i r0 = _mm512_maskz_loadu_epi16(m, B + (2 * t) * ldb + n0);
      const __m512i r1 = _mm512_maskz_loadu_epi16(m, B + (2 * t + 1) * ldb + n0);
      // unpacklo/hi interleave within 128-bit lanes: lane L of lo holds
      // columns 8L..8L+3, of hi 8L+4..8L+7; the permutes put them in order.
      const __m512i lo = _mm512_unpacklo_epi16(r0, r1), hi = _mm512_unpackhi_epi16(r0, r1);
      _mm512_storeu_si512(out + t * 2 * kNr, _mm512_permutex2var_epi64(lo, first, hi));
      _mm512_storeu_si512(out + t * 2 * kNr + kNr, _mm512_permutex2var_epi64(lo, second, hi));
    }
    out += kc * kNr;
  }
}

/// Where a micro-tile starts and ends: the first K block starts from the bias
/// (or zero), later ones from the f32 partial sums; the last rounds to bf16.
struct Tile {
  const float* bias;  ///< the tile's first column of the bias, or nullptr
  float* acc;         ///< f32 partial sums, row stride ldc
  int64_t ldc;
  uint16_t* out;      ///< bf16 result, row stride ldo
  int64_t ldo;
  bool first, last;
};

/// One MR x 32 tile over `pairs` k pairs; columns masked by m0 (0..15), m1 (16..31).
template <int MR>
void micro(const uint16_t* a, int64_t lda, const uint16_t* panel, int64_t pairs, const Tile& t, __mmask16 m0,
           __mmask16 m1) {
  __m512 acc[MR][2];
  const __m512 b0 = t.bias != nullptr ? _mm512_maskz_loadu_ps(m0, t.bias) : _mm512_setzero_ps();
  const __m512 b1 = t.bias != nullptr ? _mm512_maskz_loadu_ps(m1, t.bias + 16) : _mm512_setzero_ps();
  HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
    acc[r][0] = t.first ? b0 : _mm512_maskz_loadu_ps(m0, t.acc + r * t.ldc);
    acc[r][1] = t.first ? b1 : _mm512_maskz_loadu_ps(m1, t.acc + r * t.ldc + 16);
  }
  for (int64_t k = 0; k < pairs; ++k) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(panel + k * 2 * kNr);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(panel + k * 2 * kNr + kNr);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * k, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, w0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, w1);
    }
  }
  if (t.last) {
    // vcvtne2ps2bf16: round to nearest even, as float_to_bf16.
    const __mmask32 m = __mmask32(m0) | (__mmask32(m1) << 16);
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      _mm512_mask_storeu_epi16(t.out + r * t.ldo, m, (__m512i)_mm512_cvtne2ps_pbh(acc[r][1], acc[r][0]));
    }
  } else {
    HF2PTE_UNROLL for (int r = 0; r < MR; ++r) {
      _mm512_mask_storeu_ps(t.acc + r * t.ldc, m0, acc[r][0]);
      _mm512_mask_storeu_ps(t.acc + r * t.ldc + 16, m1, acc[r][1]);
    }
  }
}

using MicroFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, const Tile&, __mmask16, __mmask16);
constexpr MicroFn kMicro[kMr + 1] = {nullptr,   micro<1>, micro<2>, micro<3>, micro<4>,
                                     micro<5>,  micro<6>, micro<7>, micro<8>};

float* partial_sums(size_t n) {
  thread_local std::unique_ptr<float[]> buf;
  thread_local size_t cap = 0;
  if (n > cap) buf = std::make_unique_for_overwrite<float[]>(n), cap = n;
  return buf.get();
}

}  // namespace

void gemm_1t(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
             const float* bias, uint16_t* out, int64_t ldo) {
  const int64_t panels = (N + kNr - 1) / kNr;
  uint16_t* packed = scratch(size_t(panels * kKc * kNr));
  // Partial sums only when K spans more than one block.
  float* acc = K > kKc ? partial_sums(size_t(M * N)) : nullptr;
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kc = std::min(kKc, K - k0);
    pack_b(B + k0 * ldb, ldb, kc, N, packed);
    for (int64_t p = 0; p < panels; ++p) {
      const __mmask32 m = column_mask(N - p * kNr);
      const auto m0 = __mmask16(m & 0xFFFF), m1 = __mmask16(m >> 16);
      const uint16_t* panel = packed + p * kc * kNr;
      for (int64_t i = 0; i < M; i += kMr) {
        const int mr = int(std::min<int64_t>(kMr, M - i));
        const Tile t{bias != nullptr ? bias + p * kNr : nullptr,
                     acc != nullptr ? acc + i * N + p * kNr : nullptr,
                     N,
                     out + i * ldo + p * kNr,
                     ldo,
                     k0 == 0,
                     k0 + kc == K};
        kMicro[mr](A + i * lda + k0, lda, panel, kc / 2, t, m0, m1);
      }
    }
  }
}

}  // namespace hf2pte::kernels::avx512bf16
