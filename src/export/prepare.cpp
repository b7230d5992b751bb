#include "export/stages.h"

namespace hf2pte::exp {

Status prepare_backend(graph::Program& p, const ExportConfig& c, StageLog& log) {
  // portable runs every op on reference kernels; xnnpack delegates what its
  // partitioner claims (stage 6) and leaves the rest on the same kernels.
  // CUDA lowering lands with its backend (docs/decisions.md, "Backends").
  if (c.backend != Backend::kPortable && c.backend != Backend::kXnnpack) {
    return make_error(ErrorCode::kNotSupported, "backend '{}' is not available yet; use --backend portable or xnnpack",
                      backend_name(c.backend));
  }
  if (c.dtype != ScalarType::kFloat) {
    return make_error(ErrorCode::kNotSupported, "dtype {} is not available yet for the {} backend; use fp32",
                      scalar_type_name(c.dtype), backend_name(c.backend));
  }
  if (c.linear_weights != ScalarType::kFloat && c.backend != Backend::kXnnpack) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--linear-weights {} needs the xnnpack backend (its FullyConnected takes fp16 filters); the {} "
                      "backend runs fp32 weights only",
                      dtype_name(c.linear_weights), backend_name(c.backend));
  }
  log.notes.push_back(std::string("backend ") + backend_name(c.backend) + ", dtype fp32, linear weights " +
                      dtype_name(c.linear_weights));
  (void)p;
  return Status::ok();
}

}  // namespace hf2pte::exp
