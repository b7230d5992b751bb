// The CUDA kernels of the device executor, one launcher per op, looked up by
// OpId. A launcher checks shapes and dtypes on the host (what the portable
// kernels check) and enqueues work on the context's stream. It never
// allocates, synchronises or reads device data, and every value it bakes into
// a launch depends only on the program and its evaluated dims, so a run can
// be captured into a CUDA graph and replayed.
//
// Include only from .cu files (it pulls in the CUDA runtime and cuBLAS).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backends/cuda/runtime/device/cublas_api.h"

#include "backends/cuda/runtime/cuda_program.h"
#include "core/status.h"
#include "ops/op_table.h"

namespace hf2pte::cuda {

/// Highest tensor rank the kernels index (rt::kMaxTensorRank).
inline constexpr int kMaxDims = 16;

/// A contiguous (row-major) device tensor with its current sizes.
struct DevTensor {
  void* data = nullptr;
  ScalarType dtype = ScalarType::kFloat;
  int rank = 0;
  std::array<int64_t, kMaxDims> sizes{};

  std::span<const int64_t> shape() const { return {sizes.data(), size_t(rank)}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= sizes[size_t(d)];
    return n;
  }
};

/// One node argument, resolved: tensors to device views, ints evaluated.
struct DevArg {
  ValueKind kind = ValueKind::kNone;
  DevTensor tensor;                           ///< kTensor
  int64_t i = 0;                              ///< kInt
  double f = 0;                               ///< kDouble
  bool b = false;                             ///< kBool
  std::vector<int64_t> ints;                  ///< kIntList
  std::vector<std::optional<DevTensor>> list; ///< kTensorList / kOptTensorList (nullopt = None)
  ScalarType scalar_type = ScalarType::kFloat;///< kScalarType
};

/// What launchers share: the stream, cuBLAS, and device scratch the executor
/// allocated once (launchers must not allocate).
struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  ///< null when the program has no matrix product
  const CublasApi* blas = nullptr;  ///< the opened library cublas belongs to (cublas_api.h)
  float* scratch = nullptr;         ///< split-K partial sums of the GEMV kernel
  size_t scratch_floats = 0;
  unsigned* counters = nullptr;     ///< zero before and after every kernel that uses them
  size_t num_counters = 0;
  int* error_flag = nullptr;        ///< set to node_index + 1 by a kernel that meets a bad index
  int sm_count = 1;
  int node_index = 0;               ///< the node being launched (for error_flag)
};

using OpLauncher = Status (*)(DeviceContext& ctx, OpId op, std::span<const DevArg> args);

/// The launcher of `op`, or nullptr when there is no device kernel for it.
OpLauncher find_launcher(OpId op);

/// Empty when this build's kernels can run on the current device; otherwise
/// why not (e.g. no kernel image for its architecture).
std::string kernel_image_problem();

/// Scratch sizes the executor should allocate for the launchers.
inline constexpr size_t kGemvScratchFloats = size_t(4) << 20;  // 16 MiB of split-K partials
inline constexpr size_t kGemvCounters = size_t(1) << 16;

}  // namespace hf2pte::cuda
