// The device side of the CUDA delegate for builds without nvcc: no device can
// be used, and every caller is told why (the backend then runs payloads on
// the CPU reference executor).
#include "backends/cuda/runtime/device.h"

namespace hf2pte::cuda {

namespace {
constexpr const char* kReason = "hf2pte was built without CUDA (no nvcc at configure time)";
}  // namespace

std::string device_unavailable_reason() { return kReason; }

std::string device_description() { return ""; }

Result<double> measure_device_read_bandwidth() { return Status(ErrorCode::kNotSupported, kReason); }

Result<std::unique_ptr<DeviceExecutor>> make_device_executor(std::shared_ptr<const CudaProgram> /*program*/,
                                                             const ConstantLookup& /*constants*/) {
  return Status(ErrorCode::kNotSupported, kReason);
}

}  // namespace hf2pte::cuda
