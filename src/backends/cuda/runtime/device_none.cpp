// The device side of a build without nvcc: no device can run payloads, and
// every query says why, so the backend falls back to the CPU reference
// executor (or fails by name under HF2PTE_CUDA_EXECUTOR=device).
#include "backends/cuda/runtime/device.h"

namespace hf2pte::cuda {

namespace {
constexpr const char* kReason = "hf2pte was built without CUDA (no nvcc at configure time)";
}

std::string device_unavailable_reason() { return kReason; }

std::string device_description() { return ""; }

Result<std::unique_ptr<DeviceExecutor>> make_device_executor(std::shared_ptr<const CudaProgram>, const ConstantLookup&) {
  return Status(ErrorCode::kNotSupported, kReason);
}

}  // namespace hf2pte::cuda
