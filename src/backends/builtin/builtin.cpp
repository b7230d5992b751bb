#include "backends/builtin/builtin.h"

#include "backends/cuda/runtime/cuda_backend.h"
#include "backends/cuda/schema/backend_id.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"

namespace hf2pte::backends {

Status register_builtin_backends() {
  HF2PTE_RETURN_IF_ERROR(xnn::register_xnnpack_backend());
  return cuda::register_cuda_backend();
}

bool is_builtin_backend(std::string_view id) { return id == xnn::kXnnpackBackendId || id == cuda::kCudaBackendId; }

Result<std::vector<std::pair<std::string, size_t>>> describe_payload(std::string_view id,
                                                                     std::span<const uint8_t> payload,
                                                                     const pte::PteFile& file) {
  if (id == xnn::kXnnpackBackendId) return xnn::xnnpack_node_counts(payload, &file);
  if (id == cuda::kCudaBackendId) return cuda::cuda_node_counts(payload);
  return make_error(ErrorCode::kNotSupported, "unknown backend {}", id);
}

}  // namespace hf2pte::backends
