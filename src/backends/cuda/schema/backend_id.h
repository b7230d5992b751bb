// The BackendDelegate.id of hf2pte's CUDA delegate. Not upstream's
// "CudaBackend": our payload is not an AOTInductor library (docs/cuda.md), so
// upstream reports this id as an unknown backend instead of misreading it.
#pragma once

namespace hf2pte::cuda {

inline constexpr const char* kCudaBackendId = "Hf2pteCudaBackend";

}  // namespace hf2pte::cuda
