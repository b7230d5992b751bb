// bf16 x bf16 -> f32 GEMM blocks for CPUs with AVX-512 BF16 (vdpbf16ps: 32
// multiply-adds per instruction, twice an fp32 FMA's). bf16 products are exact
// in f32, so the only differences from widening both operands, running the f32
// engine and rounding once are the f32 summation order and the instructions'
// flushing of subnormals (below 1.2e-38) to zero.
//
// Layout (docs/performance.md, "bf16 GEMM"): B is repacked per call, K blocks
// of kBf16Kc rows at a time, into panels of 32 columns, each [kc/2][32][2]
// (the k pair a vdpbf16ps lane multiplies side by side); a panel (16 KiB) stays
// in L1 while 8-row blocks of A are broadcast against it pair by pair; the
// last K block rounds its sums straight into the bf16 output. Every
// C element is summed by one thread in one fixed order (K blocks ascending, k
// pairs ascending), so results do not depend on the thread count or on how the
// caller splits the columns.
#pragma once

#include <cstdint>

namespace hf2pte::kernels {

/// out[M,N] = A[M,K] B[K,N] (+ bias[N] on every row) on the calling thread,
/// summed in f32 and rounded once to bf16: A, B and out bf16 row-major with row
/// strides lda, ldb and ldo; bias f32 or nullptr; K even.
using GemmBf16Fn = void (*)(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                            int64_t ldb, const float* bias, uint16_t* out, int64_t ldo);

/// The kernel this CPU runs, or nullptr where it has no AVX-512 BF16 (16-bit
/// GEMMs then widen to f32) or while the kernel is switched off.
GemmBf16Fn gemm_bf16_kernel();

/// Tests and benches: switch the bf16 kernel off (false) or back on (true);
/// it only ever runs where the CPU has it.
void gemm_bf16_enable(bool on);

namespace avx512bf16 {
void gemm_1t(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
             const float* bias, uint16_t* out, int64_t ldo);
}  // namespace avx512bf16

}  // namespace hf2pte::kernels
