#include "core/status.h"

namespace hf2pte {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidInput: return "invalid input";
    case ErrorCode::kInvalidProgram: return "invalid program";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kNotSupported: return "not supported";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kIoError: return "i/o error";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kCancelled: return "cancelled";
  }
  return "unknown";
}

bool is_input_error(ErrorCode code) {
  return code != ErrorCode::kOk && code != ErrorCode::kInternal && code != ErrorCode::kCancelled;
}

Status Status::with_context(const std::string& where) const {
  if (is_ok() || where.empty()) return *this;
  // "what (a)" + "b" -> "what (a, b)"; "what" + "b" -> "what (b)".
  if (!message_.empty() && message_.back() == ')') {
    auto open = message_.rfind(" (");
    if (open != std::string::npos) {
      return Status(code_, message_.substr(0, message_.size() - 1) + ", " + where + ")");
    }
  }
  return Status(code_, message_ + " (" + where + ")");
}

}  // namespace hf2pte
