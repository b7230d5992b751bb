#include "export/stages.h"

#include <fmt/format.h>

namespace hf2pte::exp {

Status prepare_backend(graph::Program& p, const ExportConfig& c, StageLog& log) {
  // portable runs every op on reference kernels; xnnpack and cuda delegate
  // what their partitioners claim (stage 6) and leave the rest on the same
  // kernels. cuda programs are bf16 (resolve_backend_dtype made them so, with
  // the seed's warning) and need no GPU to export (docs/cuda.md).
  if (c.backend == Backend::kCuda) {
    if (c.dtype != ScalarType::kBFloat16) {
      return make_error(ErrorCode::kInternal, "--backend cuda reached preparation with dtype {}; expected bf16",
                        dtype_name(c.dtype));
    }
  }
  const bool half = c.dtype == ScalarType::kHalf || c.dtype == ScalarType::kBFloat16;
  if (c.linear_weights != ScalarType::kFloat && c.backend != Backend::kXnnpack) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--linear-weights {} needs the xnnpack backend (its FullyConnected takes fp16 filters); the {} "
                      "backend runs fp32 weights only",
                      dtype_name(c.linear_weights), backend_name(c.backend));
  }
  if (c.linear_weights != ScalarType::kFloat && half) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--linear-weights {} applies to fp32 programs; with --dtype {} every weight is already {}",
                      dtype_name(c.linear_weights), dtype_name(c.dtype), dtype_name(c.dtype));
  }
  if (c.dtype == ScalarType::kBFloat16 && c.backend == Backend::kXnnpack) {
    // XNNPACK has fp32 and fp16 graphs, no bf16 ones (docs/decisions.md, "Half-precision programs").
    log.warnings.push_back(
        "--dtype bf16: XNNPACK has no bf16 datatype, so only the program's fp32 parts (norms, softmax) are "
        "delegated and its bf16 ops run on the portable kernels (use --dtype fp16 for XNNPACK fp16 graphs)");
  }
  log.notes.push_back(fmt::format("backend {}, dtype {}, linear weights {}", backend_name(c.backend),
                                  dtype_name(c.dtype), dtype_name(c.linear_weights)));
  (void)p;
  return Status::ok();
}

}  // namespace hf2pte::exp
