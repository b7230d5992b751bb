// The float32 matmul under mm/addmm/bmm, exposed for kernel_bench.
#pragma once

#include <cstdint>

namespace hf2pte::kernels {

/// C[M,N] = alpha * A[M,K] B[K,N] + beta * C (+ bias[N] per row when given,
/// then beta is ignored), row-major contiguous. One thread pool does all the
/// threading: M = 1 runs the SIMD GEMV over column ranges; M > 1 splits the
/// columns across the pool and calls single-threaded OpenBLAS sgemm on each
/// block, so OpenBLAS's own spinning threads never compete with the pool.
void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, const float* B, float beta, float* C,
              const float* bias = nullptr);

}  // namespace hf2pte::kernels
