#include "backends/cuda/runtime/device/cublas_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace hf2pte::cuda {

namespace {

/// Resolves `name` from `lib` into `fn` (typed as the header declares it).
template <class Fn>
Status resolve(void* lib, const char* name, const std::string& path, Fn* fn) {
  dlerror();
  void* p = dlsym(lib, name);
  if (p == nullptr) {
    const char* why = dlerror();
    return make_error(ErrorCode::kNotSupported, "{} has no {} ({})", path, name, why != nullptr ? why : "null symbol");
  }
  *fn = reinterpret_cast<Fn>(p);
  return Status::ok();
}

Result<CublasApi> open_cublas() {
  std::string path = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  // RTLD_LOCAL: cuBLAS's symbols stay out of the global namespace. The handle
  // is never closed: cuBLAS registers exit handlers of its own. By name first
  // (LD_LIBRARY_PATH, the loader's cache), then in the build's toolkit.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef HF2PTE_CUDA_LIBRARY_DIR
  if (lib == nullptr) {
    const std::string in_toolkit = std::string(HF2PTE_CUDA_LIBRARY_DIR) + "/" + path;
    lib = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) path = in_toolkit;
  }
#endif
  if (lib == nullptr) {
    const char* why = dlerror();
    return make_error(ErrorCode::kNotSupported, "cannot open cuBLAS ({}): {}", path, why != nullptr ? why : "unknown");
  }
  CublasApi api{};
  HF2PTE_RETURN_IF_ERROR(resolve(lib, "cublasCreate_v2", path, &api.create));
  HF2PTE_RETURN_IF_ERROR(resolve(lib, "cublasDestroy_v2", path, &api.destroy));
  HF2PTE_RETURN_IF_ERROR(resolve(lib, "cublasSetStream_v2", path, &api.set_stream));
  HF2PTE_RETURN_IF_ERROR(resolve(lib, "cublasSetWorkspace_v2", path, &api.set_workspace));
  HF2PTE_RETURN_IF_ERROR(resolve(lib, "cublasGemmStridedBatchedEx", path, &api.gemm_strided_batched_ex));
  HF2PTE_RETURN_IF_ERROR(resolve(lib, "cublasGetStatusString", path, &api.status_string));
  return api;
}

}  // namespace

Result<const CublasApi*> cublas_api() {
  static std::once_flag once;
  static Result<CublasApi> api = make_error(ErrorCode::kInternal, "cuBLAS not opened");
  std::call_once(once, [] { api = open_cublas(); });
  if (!api.is_ok()) return api.status();
  return &*api;
}

}  // namespace hf2pte::cuda
