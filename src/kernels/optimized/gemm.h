// Dense routines under the optimized kernels (mm/addmm/bmm, softmax,
// permute_copy), shared with the XNNPACK payload runner and kernel_bench.
#pragma once

#include <cstdint>
#include <span>

#include "core/scalar_type.h"

namespace hf2pte::kernels {

/// C[M,N] = alpha * A[M,K] B[K,N] + beta * C (+ bias[N] per row when given,
/// then beta is ignored), row-major contiguous. One thread pool does all the
/// threading: M = 1 runs the SIMD GEMV over fixed row chunks and sums their
/// partials in order (the result does not depend on the thread count);
/// 16 <= M <= 256 with alpha 1 and (beta 0 or a bias), on AVX-512, runs our
/// k-major tile kernel (blas_matmul.cpp, ktile_gemm); other M > 1 splits the
/// columns across the pool and runs one single-threaded sgemm block each
/// (gemm_engine()), so no library's own threads compete with the pool.
void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, const float* B, float beta, float* C,
              const float* bias = nullptr);

/// The library that runs gemm_f32's single-threaded blocks: "oneDNN" or "OpenBLAS".
const char* gemm_engine();

/// C[M,N] = A[M,K] W^T (+ bias[N] per row) with W stored [N,K] row-major
/// (XNNPACK's filter layout, read in place): M = 1 is a SIMD dot-product GEMV
/// over row blocks, 16 <= M <= 256 on AVX-512 our weight-tile kernel
/// (blas_matmul.cpp, wtile_gemm), other M a single-threaded sgemm per column block.
void gemm_f32_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* W, float* C, const float* bias);

/// Which library a small single-threaded block goes to. Blocks below 4M
/// multiply-adds normally stay on OpenBLAS: oneDNN generates its kernels on
/// its first call (~37 ms), which a small model's whole prefill must not pay.
/// kInLargeProgram sends every block to oneDNN (where the build has it): for
/// callers whose small blocks only occur next to large GEMMs that have paid
/// that cost already (Winograd's 16 per-position products inside a
/// convolutional network). The choice depends on the call site only, never on
/// what ran before, so results stay reproducible.
enum class GemmBlocks { kBySize, kInLargeProgram };

/// gemm_f32_nt on the calling thread only (no pool), A and C with row
/// strides lda and ldc: for callers that split the rows across the pool
/// themselves (the NHWC convolution).
void gemm_f32_nt_1t(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* W, float* C, int64_t ldc,
                    const float* bias, GemmBlocks blocks = GemmBlocks::kBySize);

/// gemm_f32_nt with W in fp16 (IEEE half, [N, K]): decode converts each row
/// inside the dot product (half the bytes streamed); 16 <= M <= 256 on
/// AVX-512 widens each 12-row panel for the weight-tile kernel; other M > 1
/// converts each column block to float once, then sgemm.
void gemm_f32_f16nt(int64_t M, int64_t N, int64_t K, const float* A, const uint16_t* W, float* C, const float* bias);

/// C[M,N] = A[M,K] B[K,N] (+ bias[N] per row) with B 16-bit (`t`: kBFloat16 or
/// kHalf) [K,N] row-major, A, bias and C float32. M = 1: B's rows in fixed
/// chunks (as gemm_f32's GEMV: thread-count independent), each streamed by
/// the SIMD 16-bit GEMV into its own partial, summed in chunk order;
/// 16 <= M <= 256 on AVX-512: the k-major tile kernel on panels widened 512
/// rows at a time; other M > 1: column blocks of B widened once, then one sgemm each.
void gemm_f32_h16(ScalarType t, int64_t M, int64_t N, int64_t K, const float* A, const uint16_t* B, float* C,
                  const float* bias);

/// C[b] = A[b] B[b] for b < batch: A[b] [M,K], B[b] [K,N] (or [N,K] when
/// `trans_b`), C[b] [M,N], each contiguous; B[b] starts at B + b * b_stride
/// (default K * N: all of B contiguous; larger for the rows of a KV cache read
/// in place). Batches across the pool; M <= 8 is a SIMD GEMV per row (decode
/// attention, GQA groups; M > 1 only when K and N are >= 32), larger M a
/// single-threaded sgemm.
void batched_gemm_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, const float* B, bool trans_b,
                      float* C, int64_t b_stride = -1);

/// Contiguous permute of 4-byte elements for the layouts LLM graphs use (last
/// dim kept, or the last two dims swapped); false (nothing written) otherwise.
/// `perm` holds normalised dims: output dim i is input dim perm[i].
bool permute_4byte(const void* src, void* dst, std::span<const int64_t> in_shape, std::span<const int64_t> perm);

/// y = sigmoid(x) elementwise (SIMD exp), large n across the pool.
void sigmoid_f32(const float* x, float* y, int64_t n);

/// y = gelu(x) = 0.5 x (1 + erf(x / sqrt(2))) elementwise (SIMD erf), large n across the pool.
void gelu_f32(const float* x, float* y, int64_t n);

/// Softmax over the last dim of `rows` contiguous rows of `n` floats, rows across the pool.
void softmax_rows_f32(const float* x, float* y, int64_t rows, int64_t n);

}  // namespace hf2pte::kernels
