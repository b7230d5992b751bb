// cuBLAS opened at first use (dlopen) instead of linked: a linked libcublas
// and libcublasLt (~700 MB of shared objects) are mapped and relocated by
// every hf2pte process at start, GPU or not -- 230 MB of resident memory for
// `hf2pte --version`, counted against every export's and run's peak RSS.
// Only a CUDA program running on a device needs them.
#pragma once

#include <cublas_v2.h>

#include "core/status.h"

namespace hf2pte::cuda {

/// The cuBLAS entry points the device executor calls.
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  /// The C entry point (C++ also sees an inline overload taking a cudaDataType compute type).
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                                            const void* alpha, const void* A, cudaDataType a_type, int lda,
                                            long long stride_a, const void* B, cudaDataType b_type, int ldb,
                                            long long stride_b, const void* beta, void* C, cudaDataType c_type,
                                            int ldc, long long stride_c, int batch_count,
                                            cublasComputeType_t compute_type, cublasGemmAlgo_t algo);
  decltype(&cublasGetStatusString) status_string;
};

/// The library of the toolkit we were built with ("libcublas.so.<major>"),
/// opened and resolved once; an error naming the library and the loader's
/// reason when it is not installed or lacks a symbol.
Result<const CublasApi*> cublas_api();

}  // namespace hf2pte::cuda
