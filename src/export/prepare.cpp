#include "export/stages.h"

namespace hf2pte::exp {

Status prepare_backend(graph::Program& p, const ExportConfig& c, StageLog& log) {
  // The portable backend runs every op on reference kernels. XNNPACK and CUDA
  // lowering land with their backends (docs/decisions.md, "backends").
  if (c.backend != Backend::kPortable) {
    return make_error(ErrorCode::kNotSupported, "backend '{}' is not available yet; use --backend portable",
                      backend_name(c.backend));
  }
  if (c.dtype != ScalarType::kFloat) {
    return make_error(ErrorCode::kNotSupported, "dtype {} is not available yet for the portable backend; use fp32",
                      scalar_type_name(c.dtype));
  }
  log.notes.push_back("backend portable, dtype fp32");
  (void)p;
  return Status::ok();
}

}  // namespace hf2pte::exp
