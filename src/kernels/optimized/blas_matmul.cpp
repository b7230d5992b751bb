// mm / bmm / addmm, contiguous float32 and 16-bit (bf16 / f16, widened to f32
// in blocks; anything else goes to the portable kernel, which also owns all
// argument checking messages). One thread pool
// does the threading (gemm.h): M > 1 splits columns over single-threaded
// OpenBLAS sgemm (Cooperlake kernels on this machine); M = 1 (decode) runs
// the SIMD GEMVs of simd_kernels.h on row chunks; bmm with M = 1 runs the
// SIMD GEMV per head.
#include <cblas.h>
#ifdef HF2PTE_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "kernels/optimized/bf16_gemm.h"
#include "kernels/optimized/gemm.h"
#include "kernels/optimized/kernels.h"
#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Names the op in a resize error, as the portable kernels do.
Status resize(rt::Tensor& out, std::span<const int64_t> shape, OpId op) {
  Status st = out.resize(shape);
  if (st) return st;
  return Status(st.code(), fmt::format("{}: {}", op_info(op).kernel_key(), st.message()));
}

bool fast_path(const rt::EValue* v, int rank) {
  return v != nullptr && v->is_tensor() && v->tensor->dtype() == ScalarType::kFloat && v->tensor->dim() == rank &&
         v->tensor->is_contiguous() && v->tensor->raw_data() != nullptr;
}

/// One single-threaded row-major GEMM block, C = alpha A op(B) + beta C, run
/// inside a pool task (the pool owns the threads). oneDNN's sgemm for large
/// blocks where the build found it (kernel_bench, same run: 1.0-1.13x
/// OpenBLAS at the prefill shapes), else OpenBLAS's.
/// Blocks below this many multiply-adds stay on OpenBLAS even with oneDNN:
/// oneDNN's first sgemm in a process generates its kernels (~37 ms measured
/// here), which a small model's whole prefill must not pay (stories260K's
/// time to first token), while a large GEMM hides it.
constexpr int64_t kDnnlMinMacs = int64_t(1) << 22;

/// `any_size`: oneDNN whatever the block size (GemmBlocks::kInLargeProgram, gemm.h).
void sgemm_1t(bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
              int64_t ldb, float beta, float* C, int64_t ldc, bool any_size = false) {
#ifdef HF2PTE_HAVE_DNNL
  if (any_size || M * N * K >= kDnnlMinMacs) {
    // oneDNN threads with OpenMP: one thread per calling pool thread.
    thread_local bool single = (omp_set_num_threads(1), true);
    (void)single;
    dnnl_sgemm('N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#else
  (void)any_size;
#endif
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(M), int(N), int(K), alpha, A,
              int(lda), B, int(ldb), beta, C, int(ldc));
}

}  // namespace

namespace {
std::atomic<bool> g_bf16_gemm_on{true};
}  // namespace

GemmBf16Fn gemm_bf16_kernel() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return has && g_bf16_gemm_on.load(std::memory_order_relaxed) ? &avx512bf16::gemm_1t : nullptr;
}

void gemm_bf16_enable(bool on) { g_bf16_gemm_on.store(on, std::memory_order_relaxed); }

const char* gemm_engine() {
#ifdef HF2PTE_HAVE_DNNL
  return "oneDNN";
#else
  return "OpenBLAS";
#endif
}

namespace {

/// Columns per task for an [M, K] x [K, N] block split: at least 64, and enough
/// that a task does ~128K multiply-adds (smaller GEMMs, e.g. stories260K's
/// prefill, run inline: waking a thread costs more than they take).
int64_t gemm_column_grain(int64_t M, int64_t K) {
  const int64_t per_column = std::max<int64_t>(M * K, 1);
  return std::max<int64_t>(64, (131072 / per_column + 15) / 16 * 16);
}

/// Per-thread scratch that only grows (no zero fill, no allocation per call);
/// each slot is its own buffer, so a caller can hold one while the pool's
/// tasks, the caller among them, use another.
template <int kSlot = 0>
float* thread_scratch_floats(size_t n) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float[], Free> buf;
  thread_local size_t cap = 0;
  if (n > cap) {
    // 64-byte aligned: the tile kernels' vector loads then never split a cache line.
    cap = (n + 15) / 16 * 16;
    buf.reset(static_cast<float*>(std::aligned_alloc(64, cap * sizeof(float))));
    if (buf == nullptr) throw std::bad_alloc();
  }
  return buf.get();
}

// ---- Our own tile GEMMs (16..256 rows of A, the weights read in place) ----
// They replace the sgemm blocks for 16..256 rows, where oneDNN's packing of A
// per block and its M blocking cost most: Zen 4, 2 threads, bench-1b's
// shapes, fp32 W [N,K]: 1.03-1.28x oneDNN at 128 rows, 1.1-2.4x at 16-64,
// level at 256, behind at 512 (docs/performance.md, session 23). Both tile
// kernels come with the same SIMD table (AVX-512 only).
constexpr int64_t kTileMinRows = 16;
constexpr int64_t kTileMaxRows = 256;

bool tile_rows(int64_t M) { return M >= kTileMinRows && M <= kTileMaxRows && simd().gemm_wtile != nullptr; }

/// A [M, K] in tiles of `rows` rows, each transposed to [K][rows] (t[k * rows
/// + i] = A[m0 + i, k]), the last tile padded with zero rows: the layout both
/// tile kernels read A in. Held in the calling thread's second scratch slot
/// (the pool's tasks use the first), across the pool.
const float* transposed_row_tiles(const float* A, int64_t M, int64_t K, int64_t rows) {
  const int64_t tiles = (M + rows - 1) / rows;
  float* out = thread_scratch_floats<1>(size_t(tiles * K * rows));
  parallel_for(tiles, tiles * K * rows < 65536 ? tiles : 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* dst = out + t * K * rows;
      const int64_t m0 = t * rows, filled = std::min(rows, M - m0);
      if (filled < rows) std::fill(dst, dst + K * rows, 0.0f);
      for (int64_t i = 0; i < filled; ++i) {
        const float* src = A + (m0 + i) * K;
        for (int64_t k = 0; k < K; ++k) dst[k * rows + i] = src[k];
      }
    }
  });
  return out;
}

// ---- Weight-tile GEMM (weights [N, K]) ----
// C[M,N] = A[M,K] W (+ bias), W given a panel of kWtileCols columns at a
// time as floats. A is transposed once into tiles of kWtileRows rows
// (at[t][k][m]); each task takes whole panels and runs every row tile against
// each (SimdKernels::gemm_wtile). Every output is one accumulator summed in k
// order, so neither the threads nor the tiling change a result.

/// A panel's weights as the tile reads them (SimdKernels::gemm_wtile).
struct WPanel {
  const float* w;
  int64_t stride;
};

/// `panel(p, nn, scratch)` gives panel p (its nn <= kWtileCols columns; all
/// kWtileCols readable) using up to `scratch_floats` of the task's scratch.
template <class PanelFn>
void wtile_gemm(int64_t M, int64_t N, int64_t K, const float* A, float* C, const float* bias, size_t scratch_floats,
                const PanelFn& panel) {
  const SimdKernels& simd_k = simd();
  const int64_t tiles = (M + kWtileRows - 1) / kWtileRows, panels = (N + kWtileCols - 1) / kWtileCols;
  const float* at = transposed_row_tiles(A, M, K, kWtileRows);
  // Tasks of ~128K multiply-adds or more, as the sgemm blocks (a tiny model's
  // prefill runs inline).
  const int64_t grain = (gemm_column_grain(M, K) + kWtileCols - 1) / kWtileCols;
  parallel_for(panels, grain, [&](int64_t p0, int64_t p1) {
    float* scratch = thread_scratch_floats(scratch_floats);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * kWtileCols, nn = std::min(kWtileCols, N - n0);
      const WPanel w = panel(p, nn, scratch);
      for (int64_t t = 0; t < tiles; ++t) {
        simd_k.gemm_wtile(at + t * K * kWtileRows, w.w, w.stride, K, bias != nullptr ? bias + n0 : nullptr,
                          C + t * kWtileRows * N + n0, N, std::min(kWtileRows, M - t * kWtileRows), nn);
      }
    }
  });
}

/// Panels of W [N, K] float (rows = columns of the product), read in place;
/// a last panel of fewer rows is copied and padded with zeros.
void wtile_gemm_nk(int64_t M, int64_t N, int64_t K, const float* A, const float* W, float* C, const float* bias) {
  wtile_gemm(M, N, K, A, C, bias, size_t(kWtileCols * K), [&](int64_t p, int64_t nn, float* s) {
    const float* w = W + p * kWtileCols * K;
    if (nn == kWtileCols) return WPanel{w, K};
    std::copy(w, w + nn * K, s);
    std::fill(s + nn * K, s + kWtileCols * K, 0.0f);
    return WPanel{s, K};
  });
}

// ---- K-major GEMM (weights [K, N]) ----
// The same products for weights stored k-major: A packed once into tiles of
// kKtileRows rows (a[t][k][i]); each task takes blocks of kKtileBlockCols
// columns and, kKtileDepth rows of W at a time, widens the block into
// panel-major scratch, then runs every row tile against each panel
// (SimdKernels::gemm_ktile), chaining the K blocks through C (the same sums
// as one pass). The widening reads whole row pieces of the block: W's rows are
// N apart, and a strip one tile wide started a new 4 KiB page on every k,
// which the hardware prefetchers do not follow (Zen 4, bench-1b's fp16 'down'
// shape at 96 rows: 150-164 GFLOPS for 12-column strips read into the
// weight-tile kernel, 171-180 this way; docs/performance.md, session 23).
constexpr int64_t kKtileBlockCols = 4 * kKtileCols;
constexpr int64_t kKtileDepth = 512;
constexpr int64_t kKtilePanelFloats = kKtileDepth * kKtileCols;

/// Asks for `rows` row pieces of `bytes`, `stride` bytes apart, from `first`
/// (the next item of a k-major GEMM, while this one computes): each row piece
/// sits on its own 4 KiB page, where the hardware prefetchers stop (Zen 4,
/// bench-1b's fp16 'down' shape at 128 rows, cold weights: 170-177 GFLOPS
/// without, 190-193 with).
void prefetch_rows(const void* first, int64_t rows, int64_t stride, int64_t bytes) {
  const char* p = static_cast<const char*>(first);
  for (int64_t k = 0; k < rows; ++k, p += stride) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 2);
  }
}

/// W is [K, N] of `elem_bytes` elements; `widen(k0, kc, n0, nb, dst)` puts
/// W[k0 + k, n0 + j] (k < kc, j < nb) as floats into
/// dst's panels (SimdKernels::widen_panels16's layout, panel stride
/// kKtilePanelFloats), zeros to the last panel's end.
template <class WidenFn>
void ktile_gemm(int64_t M, int64_t N, int64_t K, const float* A, const void* W, int64_t elem_bytes, float* C,
                const float* bias, const WidenFn& widen) {
  const SimdKernels& simd_k = simd();
  const int64_t tiles = (M + kKtileRows - 1) / kKtileRows, blocks = (N + kKtileBlockCols - 1) / kKtileBlockCols;
  const float* a = transposed_row_tiles(A, M, K, kKtileRows);
  // Each task runs its blocks K block by K block, so the pages of one K block
  // of rows are all visited before the next (a 4 KiB-page TLB does not hold
  // a whole k-major matrix's rows), and asks for the next item's rows
  // while this one computes.
  const int64_t grain = (gemm_column_grain(M, K) + kKtileBlockCols - 1) / kKtileBlockCols;
  parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    float* w = thread_scratch_floats(size_t(kKtileBlockCols / kKtileCols * kKtilePanelFloats));
    const char* src = static_cast<const char*>(W);
    auto block_cols = [&](int64_t b) { return std::min(kKtileBlockCols, N - b * kKtileBlockCols); };
    // One pass even when K = 0: the first pass writes the bias (or zeros).
    for (int64_t k0 = 0; k0 == 0 || k0 < K; k0 += kKtileDepth) {
      const int64_t kc = std::min(kKtileDepth, K - k0);
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t n0 = b * kKtileBlockCols, nb = block_cols(b);
        const int64_t next_k = b + 1 < b1 ? k0 : k0 + kc, next_b = b + 1 < b1 ? b + 1 : b0;
        prefetch_rows(src + (next_k * N + next_b * kKtileBlockCols) * elem_bytes,
                      std::min(kKtileDepth, K - next_k), N * elem_bytes, block_cols(next_b) * elem_bytes);
        widen(k0, kc, n0, nb, w);
        for (int64_t t = 0; t < tiles; ++t) {
          for (int64_t p = 0; p * kKtileCols < nb; ++p) {
            const int64_t j0 = n0 + p * kKtileCols, nr = std::min(kKtileCols, nb - p * kKtileCols);
            simd_k.gemm_ktile(a + (t * K + k0) * kKtileRows, w + p * kKtilePanelFloats, kc,
                              bias != nullptr ? bias + j0 : nullptr, k0 == 0, C + t * kKtileRows * N + j0, N,
                              std::min(kKtileRows, M - t * kKtileRows), nr);
          }
        }
      }
    }
  });
}

/// ktile_gemm on float W [K, N]: the block copied into panels.
void ktile_gemm_f32(int64_t M, int64_t N, int64_t K, const float* A, const float* W, float* C, const float* bias) {
  ktile_gemm(M, N, K, A, W, 4, C, bias, [&](int64_t k0, int64_t kc, int64_t n0, int64_t nb, float* dst) {
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = W + (k0 + k) * N + n0;
      for (int64_t j = 0; j < nb; j += kKtileCols) {
        float* d = dst + (j / kKtileCols) * kKtilePanelFloats + k * kKtileCols;
        const int64_t n = std::min(kKtileCols, nb - j);
        std::copy(src + j, src + j + n, d);
        std::fill(d + n, d + kKtileCols, 0.0f);
      }
    }
  });
}

/// The fixed row chunks of a split-K GEMV over W [K, N]: at most 16 chunks of
/// at least 64 rows and ~64K weights each, a multiple of 4 where there are 4
/// or more (the pool's parts, 2 per thread, then get equal shares on 2
/// threads: 9 chunks made one thread stream 5/9 of q/k/v/o at 110m). They
/// depend on K and N only, so the partial sums do not depend on the threads.
struct SplitK {
  int64_t chunks, rows;
};
SplitK split_k(int64_t K, int64_t N) {
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>({16, (K + 63) / 64, std::max<int64_t>(1, K * N / 65536)}));
  if (chunks >= 4) chunks -= chunks % 4;
  const int64_t rows = (K + chunks - 1) / chunks;
  return {(K + rows - 1) / rows, rows};
}

/// Decode GEMV y = alpha * x W (+ bias, or + beta * y), W [K, N] row-major.
/// The rows of W are split into fixed chunks, each streamed contiguously by
/// one task (single-threaded OpenBLAS sgemv: 1.1-1.25x our AVX-512 loop on
/// the same chunks, same run) into its own partial y; the partials are then
/// summed in chunk order. Chunks depend only on K and N, so the result does
/// not depend on the thread count. (Splitting columns instead makes every
/// task read strided row pieces: 1.1-1.7x slower at the 'down' shapes.)
void gemv_split_k(int64_t N, int64_t K, float alpha, const float* x, const float* W, float beta, float* y,
                  const float* bias) {
  const SplitK split = split_k(K, N);
  const int64_t chunks = split.chunks, rows = split.rows;
  float* part = thread_scratch_floats(size_t(chunks * N));
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t k0 = c * rows, k1 = std::min(K, k0 + rows);
      // beta = 1 on zeros: OpenBLAS's beta = 0 still multiplies what the scratch held (NaN stays).
      std::fill(part + c * N, part + (c + 1) * N, 0.0f);
      cblas_sgemv(CblasRowMajor, CblasTrans, int(k1 - k0), int(N), 1.0f, W + k0 * N, int(N), x + k0, 1, 1.0f, part + c * N, 1);
    }
  });
  parallel_for(N, 4096, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float s = part[n];
      for (int64_t c = 1; c < chunks; ++c) s += part[c * N + n];
      // beta = 0 ignores y (it may hold NaN/inf from an earlier op).
      y[n] = alpha * s + (bias != nullptr ? bias[n] : beta == 0.0f ? 0.0f : beta * y[n]);
    }
  });
}

}  // namespace

void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, const float* B, float beta, float* C,
              const float* bias) {
  if (M == 1) {
    gemv_split_k(N, K, alpha, A, B, beta, C, bias);
    return;
  }
  if (alpha == 1.0f && (beta == 0.0f || bias != nullptr) && tile_rows(M)) {
    ktile_gemm_f32(M, N, K, A, B, C, bias);
    return;
  }
  parallel_for(N, gemm_column_grain(M, K), [&](int64_t n0, int64_t n1) {
    float b = beta;
    if (bias != nullptr) {
      for (int64_t i = 0; i < M; ++i) std::copy(bias + n0, bias + n1, C + i * N + n0);
      b = 1.0f;
    }
    sgemm_1t(false, M, n1 - n0, K, alpha, A, K, B + n0, N, b, C + n0, N);
  });
}

void gemm_f32_f16nt(int64_t M, int64_t N, int64_t K, const float* A, const uint16_t* W, float* C, const float* bias) {
  if (M * N == 0) return;
  const SimdKernels& simd_k = simd();
  if (M == 1) {  // as gemm_f32_nt: one sequential row per output, rows split evenly
    parallel_for(N, N * K < 65536 ? N : 16, [&](int64_t n0, int64_t n1) {
      simd_k.gemv_t_f16(A, W, C, K, K, n0, n1);
      if (bias != nullptr) {
        for (int64_t n = n0; n < n1; ++n) C[n] += bias[n];
      }
    });
    return;
  }
  if (tile_rows(M)) {
    // Each panel's rows widened with a padded stride: rows 4 KiB apart would
    // share L1 sets.
    const int64_t ld = K + 16;
    wtile_gemm(M, N, K, A, C, bias, size_t(kWtileCols * ld), [&](int64_t p, int64_t nn, float* s) {
      for (int64_t j = 0; j < kWtileCols; ++j) {
        if (j < nn) {
          simd_k.half_to_float_row(W + (p * kWtileCols + j) * K, s + j * ld, K);
        } else {
          std::fill(s + j * ld, s + j * ld + K, 0.0f);
        }
      }
      return WPanel{s, ld};
    });
    return;
  }
  parallel_for(N, gemm_column_grain(M, K), [&](int64_t n0, int64_t n1) {
    float* w = thread_scratch_floats(size_t((n1 - n0) * K));
    simd_k.half_to_float_row(W + n0 * K, w, (n1 - n0) * K);
    if (bias != nullptr) {
      for (int64_t i = 0; i < M; ++i) std::copy(bias + n0, bias + n1, C + i * N + n0);
    }
    sgemm_1t(true, M, n1 - n0, K, 1.0f, A, K, w, K, bias != nullptr ? 1.0f : 0.0f, C + n0, N);
  });
}

/// Rows per batch up to which batched_gemm_f32 runs GEMVs instead of sgemm.
constexpr int64_t kGemvRows = 8;
/// ... when K and N are at least this (narrow heads, e.g. head_dim 8, stay sgemm).
constexpr int64_t kGemvMinDim = 32;
/// Rows per batch up to which narrow heads (is_narrow_head) take the SIMD
/// narrow loops; longer prefills stay sgemm.
constexpr int64_t kNarrowRows = 16;

void gemm_f32_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* W, float* C, const float* bias) {
  if (M * N == 0) return;
  if (M == 1) {
    // Rows of W are contiguous: each task streams its own block of rows, dot
    // products against x (kept in L1) by the SIMD table.
    // Units of 16 rows: the pool's parts (2 per thread) then split N evenly;
    // small filters run inline.
    const SimdKernels& simd_k = simd();
    const int64_t grain = N * K < 65536 ? N : 16;
    parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
      simd_k.gemv_t(A, W, C, K, K, n0, n1);
      if (bias != nullptr) {
        for (int64_t n = n0; n < n1; ++n) C[n] += bias[n];
      }
    });
    return;
  }
  if (tile_rows(M)) {
    wtile_gemm_nk(M, N, K, A, W, C, bias);
    return;
  }
  parallel_for(N, gemm_column_grain(M, K), [&](int64_t n0, int64_t n1) {
    if (bias != nullptr) {
      for (int64_t i = 0; i < M; ++i) std::copy(bias + n0, bias + n1, C + i * N + n0);
    }
    // beta = 0 without a bias: C may hold NaN from an earlier op, and sgemm
    // does not read C then.
    sgemm_1t(true, M, n1 - n0, K, 1.0f, A, K, W + n0 * K, K, bias != nullptr ? 1.0f : 0.0f, C + n0, N);
  });
}

void gemm_f32_nt_1t(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* W, float* C, int64_t ldc,
                    const float* bias, GemmBlocks blocks) {
  if (M * N == 0) return;
  if (bias != nullptr) {
    for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, C + i * ldc);
  }
  sgemm_1t(true, M, N, K, 1.0f, A, lda, W, K, bias != nullptr ? 1.0f : 0.0f, C, ldc,
           blocks == GemmBlocks::kInLargeProgram);
}

void batched_gemm_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, const float* B, bool trans_b,
                      float* C, int64_t b_stride) {
  if (M * N == 0) return;
  if (b_stride < 0) b_stride = K * N;
  const SimdKernels& k = simd();
  // Narrow heads (head_dim 8 or 16): q . K^T reduces 16 keys at once and
  // p . V accumulates two keys per vector, instead of dot products of 8.
  const bool narrow = M <= kNarrowRows && (trans_b ? is_narrow_head(K) : is_narrow_head(N));
  if (narrow || M == 1 || (M <= kGemvRows && std::min(K, N) >= kGemvMinDim)) {
    // Decode attention (M = 1, or the query heads of a GQA group): one SIMD
    // loop per row beats sgemm's packing at these sizes.
    parallel_for(batch, batch * M * K * N >= 65536 ? 1 : batch, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) {
        for (int64_t r = 0; r < M; ++r) {
          const float* a = A + (i * M + r) * K;
          float* c = C + (i * M + r) * N;
          if (narrow && trans_b) {
            k.dot_rows_narrow(a, B + i * b_stride, c, K, N);
          } else if (narrow) {
            k.axpy_rows_narrow(a, B + i * b_stride, c, K, N);
          } else if (trans_b) {
            k.gemv_t(a, B + i * b_stride, c, K, K, 0, N);
          } else {
            k.gemv(a, B + i * b_stride, nullptr, c, K, N, 0, N);
          }
        }
      }
    });
    return;
  }
  // Other small batches run inline.
  parallel_for(batch, batch * M * K * N >= 65536 ? 1 : batch, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      sgemm_1t(trans_b, M, N, K, 1.0f, A + i * M * K, K, B + i * b_stride, trans_b ? K : N, 0.0f, C + i * M * N, N);
    }
  });
}

namespace {

void sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, const float* B, float beta, float* C,
           const float* bias = nullptr) {
  gemm_f32(M, N, K, alpha, A, B, beta, C, bias);
}

// ---- 16-bit (bf16 / f16) operands ----
// Widened to f32 exactly in cache-sized blocks, multiplied by the f32 engine,
// each result rounded once to the out's type: the portable kernel's numbers up
// to f32 summation order (it accumulates in double), at the f32 engine's speed
// with half the weight bytes streamed.

bool is_half(ScalarType t) { return t == ScalarType::kBFloat16 || t == ScalarType::kHalf; }

bool half_operand(const rt::EValue* v, int rank, ScalarType t) {
  return v != nullptr && v->is_tensor() && v->tensor->dtype() == t && v->tensor->dim() == rank &&
         v->tensor->is_contiguous() && v->tensor->raw_data() != nullptr;
}

void widen(ScalarType t, const uint16_t* src, float* dst, int64_t n) {
  if (t == ScalarType::kBFloat16) {
    simd().bf16_to_float_row(src, dst, n);
  } else {
    simd().half_to_float_row(src, dst, n);
  }
}

/// A whole 16-bit tensor widened (activations: small next to the weights).
std::vector<float> widened(const rt::Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  parallel_for(t.numel(), 1 << 16, [&](int64_t i0, int64_t i1) {
    widen(t.dtype(), t.data<uint16_t>() + i0, out.data() + i0, i1 - i0);
  });
  return out;
}

void narrow_into(const std::vector<float>& src, rt::Tensor& out) {
  uint16_t* d = out.data<uint16_t>();
  const bool bf16 = out.dtype() == ScalarType::kBFloat16;
  parallel_for(int64_t(src.size()), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) d[i] = bf16 ? float_to_bf16(src[size_t(i)]) : float_to_half(src[size_t(i)]);
  });
}

}  // namespace

void gemm_f32_h16(ScalarType t, int64_t M, int64_t N, int64_t K, const float* A, const uint16_t* B, float* C,
                  const float* bias) {
  if (M == 1) {
    const SplitK split = split_k(K, N);
    const int64_t chunks = split.chunks, rows = split.rows;
    const SimdKernels& k = simd();
    const auto gemv = t == ScalarType::kBFloat16 ? k.gemv_bf16 : k.gemv_f16;
    float* part = thread_scratch_floats(size_t(chunks * N));
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t k0 = c * rows, k1 = std::min(K, k0 + rows);
        gemv(A + k0, B + k0 * N, nullptr, part + c * N, k1 - k0, N, 0, N);
      }
    });
    parallel_for(N, 4096, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        float s = part[n];
        for (int64_t c = 1; c < chunks; ++c) s += part[c * N + n];
        C[n] = s + (bias != nullptr ? bias[n] : 0.0f);
      }
    });
    return;
  }
  if (tile_rows(M)) {
    const bool bf16 = t == ScalarType::kBFloat16;
    ktile_gemm(M, N, K, A, B, 2, C, bias, [&](int64_t k0, int64_t kc, int64_t n0, int64_t nb, float* dst) {
      simd().widen_panels16(B + k0 * N + n0, N, kc, nb, bf16, dst, kKtilePanelFloats);
    });
    return;
  }
  parallel_for(N, gemm_column_grain(M, K), [&](int64_t n0, int64_t n1) {
    const int64_t nb = n1 - n0;
    float* w = thread_scratch_floats(size_t(K * nb));
    for (int64_t k = 0; k < K; ++k) widen(t, B + k * N + n0, w + k * nb, nb);
    if (bias != nullptr) {
      for (int64_t i = 0; i < M; ++i) std::copy(bias + n0, bias + n1, C + i * N + n0);
    }
    sgemm_1t(false, M, nb, K, 1.0f, A, K, w, nb, bias != nullptr ? 1.0f : 0.0f, C + n0, N);
  });
}

namespace {

/// mm / addmm (beta = alpha = 1, bias [N]) on 16-bit operands of one dtype;
/// false when the shapes or layouts are not the fast path's (the caller falls back).
bool half_mm(const rt::EValue* bias_v, const rt::EValue* a_v, const rt::EValue* b_v, rt::EValue* out_v, OpId op,
             Status* st) {
  if (a_v == nullptr || !a_v->is_tensor() || !is_half(a_v->tensor->dtype())) return false;
  const ScalarType t = a_v->tensor->dtype();
  if (!half_operand(a_v, 2, t) || !half_operand(b_v, 2, t) || out_v == nullptr || !out_v->is_tensor() ||
      out_v->tensor->dtype() != t || a_v->tensor->size(1) != b_v->tensor->size(0) || a_v->tensor->size(1) == 0) {
    return false;
  }
  const rt::Tensor &a = *a_v->tensor, &b = *b_v->tensor;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<float> bias;
  if (bias_v != nullptr) {
    if (!half_operand(bias_v, 1, t) || bias_v->tensor->size(0) != N) return false;
    bias = widened(*bias_v->tensor);
  }
  rt::Tensor& out = *out_v->tensor;
  const int64_t shape[2] = {M, N};
  *st = resize(out, shape, op);
  if (!st->is_ok()) return true;
  if (!out.is_contiguous()) return false;
  if (GemmBf16Fn kernel = gemm_bf16_kernel(); kernel != nullptr && t == ScalarType::kBFloat16 && M > 1 && K % 2 == 0) {
    // Both operands stay bf16 (bf16_gemm.h); the columns split across the pool
    // in whole panels, each summed in the kernel's one fixed order.
    const float* b0 = bias_v != nullptr ? bias.data() : nullptr;
    parallel_for(N, (gemm_column_grain(M, K) + 31) / 32 * 32, [&](int64_t n0, int64_t n1) {
      kernel(M, n1 - n0, K, a.data<uint16_t>(), K, b.data<uint16_t>() + n0, N, b0 != nullptr ? b0 + n0 : nullptr,
             out.data<uint16_t>() + n0, N);
    });
    return true;
  }
  std::vector<float> c32(size_t(M * N));
  const std::vector<float> a32 = widened(a);
  gemm_f32_h16(t, M, N, K, a32.data(), b.data<uint16_t>(), c32.data(), bias_v != nullptr ? bias.data() : nullptr);
  narrow_into(c32, out);
  return true;
}

}  // namespace

// [self, mat2, out, ret]
Status mm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (Status st; args.size() == 4 && half_mm(nullptr, args[0], args[1], args[2], OpId::MmOut, &st)) {
    if (st.is_ok() && args[3] != args[2]) *args[3] = *args[2];
    return st;
  }
  if (args.size() != 4 || !fast_path(args[0], 2) || !fast_path(args[1], 2) || !args[2]->is_tensor() ||
      args[0]->tensor->size(1) != args[1]->tensor->size(0) || args[2]->tensor->dtype() != ScalarType::kFloat) {
    return kernels::MmOut(ctx, args);
  }
  const rt::Tensor &a = *args[0]->tensor, &b = *args[1]->tensor;
  rt::Tensor& out = *args[2]->tensor;
  int64_t shape[2] = {a.size(0), b.size(1)};
  HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::MmOut));
  if (!out.is_contiguous()) return kernels::MmOut(ctx, args);
  if (shape[0] * shape[1] == 0) return Status::ok();
  if (a.size(1) == 0) {
    std::fill(out.data<float>(), out.data<float>() + out.numel(), 0.0f);
  } else {
    sgemm(shape[0], shape[1], a.size(1), 1.0f, a.data<float>(), b.data<float>(), 0.0f, out.data<float>());
  }
  if (args[3] != args[2]) *args[3] = *args[2];
  return Status::ok();
}

// [self, mat2, out, ret]
Status bmm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  // 16-bit attention: both operands widened, the f32 path below, one rounding.
  if (args.size() == 4 && args[0]->is_tensor() && is_half(args[0]->tensor->dtype())) {
    const ScalarType t = args[0]->tensor->dtype();
    if (half_operand(args[0], 3, t) && half_operand(args[1], 3, t) && args[2]->is_tensor() &&
        args[2]->tensor->dtype() == t && args[0]->tensor->size(0) == args[1]->tensor->size(0) &&
        args[0]->tensor->size(2) == args[1]->tensor->size(1) && args[0]->tensor->size(2) > 0) {
      const rt::Tensor &a = *args[0]->tensor, &b = *args[1]->tensor;
      rt::Tensor& out = *args[2]->tensor;
      const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
      const int64_t shape[3] = {B, M, N};
      HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::BmmOut));
      if (out.is_contiguous()) {
        if (GemmBf16Fn kernel = gemm_bf16_kernel(); kernel != nullptr && t == ScalarType::kBFloat16 && M > 1 &&
                                                     K % 2 == 0) {
          // Prefill attention on bf16 operands (bf16_gemm.h): heads across the
          // pool, or the columns of one head's product.
          const uint16_t *pa = a.data<uint16_t>(), *pb = b.data<uint16_t>();
          uint16_t* pc = out.data<uint16_t>();
          if (B >= pool_threads()) {
            parallel_for(B, 1, [&](int64_t i0, int64_t i1) {
              for (int64_t i = i0; i < i1; ++i) {
                kernel(M, N, K, pa + i * M * K, K, pb + i * K * N, N, nullptr, pc + i * M * N, N);
              }
            });
          } else {
            for (int64_t i = 0; i < B; ++i) {
              parallel_for(N, (gemm_column_grain(M, K) + 31) / 32 * 32, [&](int64_t n0, int64_t n1) {
                kernel(M, n1 - n0, K, pa + i * M * K, K, pb + i * K * N + n0, N, nullptr, pc + i * M * N + n0, N);
              });
            }
          }
          if (args[3] != args[2]) *args[3] = *args[2];
          return Status::ok();
        }
        std::vector<float> c32(size_t(B * M * N));
        const std::vector<float> a32 = widened(a), b32 = widened(b);
        if (M == 1 || B >= pool_threads()) {
          batched_gemm_f32(B, M, N, K, a32.data(), b32.data(), false, c32.data());
        } else {
          for (int64_t i = 0; i < B; ++i) {
            sgemm(M, N, K, 1.0f, a32.data() + i * M * K, b32.data() + i * K * N, 0.0f, c32.data() + i * M * N);
          }
        }
        narrow_into(c32, out);
        if (args[3] != args[2]) *args[3] = *args[2];
        return Status::ok();
      }
    }
  }
  if (args.size() != 4 || !fast_path(args[0], 3) || !fast_path(args[1], 3) || !args[2]->is_tensor() ||
      args[0]->tensor->size(0) != args[1]->tensor->size(0) || args[0]->tensor->size(2) != args[1]->tensor->size(1) ||
      args[2]->tensor->dtype() != ScalarType::kFloat || args[0]->tensor->size(2) == 0) {
    return kernels::BmmOut(ctx, args);
  }
  const rt::Tensor &a = *args[0]->tensor, &b = *args[1]->tensor;
  rt::Tensor& out = *args[2]->tensor;
  int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  int64_t shape[3] = {B, M, N};
  HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::BmmOut));
  if (!out.is_contiguous()) return kernels::BmmOut(ctx, args);
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float* pc = out.data<float>();
  if (M == 1 || B >= pool_threads()) {
    // Decode attention (a GEMV per head) or prefill attention (a
    // single-threaded GEMM per head): heads across the pool.
    batched_gemm_f32(B, M, N, K, pa, pb, false, pc);
  } else {
    for (int64_t i = 0; i < B; ++i) sgemm(M, N, K, 1.0f, pa + i * M * K, pb + i * K * N, 0.0f, pc + i * M * N);
  }
  if (args[3] != args[2]) *args[3] = *args[2];
  return Status::ok();
}

// [self(bias), mat1, mat2, beta, alpha, out, ret]; fast path: bias [N] or [1, N]
Status addmm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (Status st; args.size() == 7 && args[3]->is_scalar() && args[4]->is_scalar() &&
                 args[3]->scalar_as_double() == 1.0 && args[4]->scalar_as_double() == 1.0 &&
                 half_mm(args[0], args[1], args[2], args[5], OpId::AddmmOut, &st)) {
    if (st.is_ok() && args[6] != args[5]) *args[6] = *args[5];
    return st;
  }
  if (args.size() != 7 || !fast_path(args[1], 2) || !fast_path(args[2], 2) || !args[0]->is_tensor() ||
      !args[5]->is_tensor() || args[0]->tensor->dtype() != ScalarType::kFloat || !args[0]->tensor->is_contiguous() ||
      args[1]->tensor->size(1) != args[2]->tensor->size(0) || args[1]->tensor->size(1) == 0 ||
      !args[3]->is_scalar() || !args[4]->is_scalar() || args[5]->tensor->dtype() != ScalarType::kFloat) {
    return kernels::AddmmOut(ctx, args);
  }
  const rt::Tensor &bias = *args[0]->tensor, &a = *args[1]->tensor, &b = *args[2]->tensor;
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  bool row_bias = (bias.dim() == 1 && bias.size(0) == N) || (bias.dim() == 2 && bias.size(0) == 1 && bias.size(1) == N);
  if (!row_bias) return kernels::AddmmOut(ctx, args);
  rt::Tensor& out = *args[5]->tensor;
  int64_t shape[2] = {M, N};
  HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::AddmmOut));
  if (!out.is_contiguous()) return kernels::AddmmOut(ctx, args);
  float beta = float(args[3]->scalar_as_double()), alpha = float(args[4]->scalar_as_double());
  float* c = out.data<float>();
  if (beta == 1.0f) {  // the exported linear layers: bias folded into the GEMV/GEMM
    sgemm(M, N, K, alpha, a.data<float>(), b.data<float>(), 0.0f, c, bias.data<float>());
    if (args[6] != args[5]) *args[6] = *args[5];
    return Status::ok();
  }
  for (int64_t i = 0; i < M; ++i) {
    // beta = 0 ignores self entirely (NaN included), as ATen does.
    for (int64_t j = 0; j < N; ++j) c[i * N + j] = beta == 0.0f ? 0.0f : beta * bias.data<float>()[j];
  }
  sgemm(M, N, K, alpha, a.data<float>(), b.data<float>(), 1.0f, c);
  if (args[6] != args[5]) *args[6] = *args[5];
  return Status::ok();
}

}  // namespace hf2pte::kernels
