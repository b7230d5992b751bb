// The device side of the CUDA delegate: runs a CudaProgram on an NVIDIA GPU.
// Compiled from device/*.cu when CMake finds nvcc (HF2PTE_HAVE_CUDA); without
// it, device_none.cpp reports why no device can be used, and the backend runs
// payloads on the CPU reference executor.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backends/cuda/runtime/cuda_program.h"
#include "core/status.h"
#include "runtime/evalue.h"

namespace hf2pte::cuda {

/// The bytes of a named constant (Program.named_data in a loaded file; a map
/// in tests). The bytes must outlive the executor.
using ConstantLookup = std::function<Result<std::span<const uint8_t>>(std::string_view key)>;

/// Empty when a CUDA device can run payloads in this process; otherwise why
/// not ("hf2pte was built without CUDA", "cudaGetDeviceCount: no CUDA-capable
/// device is detected", ...). Probed once, thread-safe.
std::string device_unavailable_reason();

/// Name and memory of device 0 ("NVIDIA H200, 139.8 GiB, sm_90"), or "".
std::string device_description();

/// The device's measured read bandwidth in GB/s: the best of a few passes of
/// a streaming-read kernel over a 1 GiB buffer (the "limit" `hf2pte bench`
/// compares decode against, as it does with the CPU probe).
Result<double> measure_device_read_bandwidth();

/// One payload loaded on the device: weights uploaded once, one arena for the
/// intermediates (CudaProgram::arena_bytes), state tensors (KV caches) kept on
/// the device, one stream.
class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  /// `args`: the DelegateCall's host tensors, inputs then outputs. Inputs are
  /// copied to the device, outputs resized and copied back. A state input is
  /// uploaded the first time its host buffer is seen and lives on the device
  /// from then on (the host copy is not updated); a plain input that a node
  /// mutates is copied back after the run.
  virtual Status execute(std::span<rt::EValue*> args) = 0;
};

/// Fails with kNotSupported (naming the op) when a node has no device kernel,
/// with the CUDA error text when an allocation or upload fails.
Result<std::unique_ptr<DeviceExecutor>> make_device_executor(std::shared_ptr<const CudaProgram> program,
                                                             const ConstantLookup& constants);

}  // namespace hf2pte::cuda
