#include "export/export_config.h"

namespace hf2pte::exp {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kPortable: return "portable";
    case Backend::kXnnpack: return "xnnpack";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

Result<Backend> parse_backend(const std::string& s) {
  if (s == "portable") return Backend::kPortable;
  if (s == "xnnpack") return Backend::kXnnpack;
  if (s == "cuda") return Backend::kCuda;
  return make_error(ErrorCode::kInvalidArgument, "unknown backend '{}'; expected portable, xnnpack or cuda", s);
}

}  // namespace hf2pte::exp
