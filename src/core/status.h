// Errors as values: every fallible call in hf2pte returns Status or Result<T>.
// No exception crosses a library boundary (docs/STYLE.md rule 1).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace hf2pte {

/// Error classes, grouped by who is at fault. The CLI maps bad-input classes
/// to exit code 2 and internal ones to exit code 1.
enum class ErrorCode {
  kOk = 0,
  // The input (file, flag, checkpoint) is wrong: exit code 2.
  kInvalidArgument,  ///< bad flag, bad value given by the caller
  kInvalidInput,     ///< a file we read is malformed or inconsistent
  kInvalidProgram,   ///< a .pte fails verification
  kNotFound,         ///< a file, tensor, method or operator does not exist
  kNotSupported,     ///< valid input we do not (yet) handle
  kOutOfRange,       ///< a size or index exceeds a bound (dynamic shape, arena)
  kIoError,          ///< reading or writing a file failed
  // Our fault: exit code 1.
  kInternal,
  kCancelled,
};

const char* error_code_name(ErrorCode code);
/// True when the error is the caller's input, not hf2pte's own defect.
bool is_input_error(ErrorCode code);

/// A status: ok, or an error class with a one-line message ("what (where)").
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Returns a copy with " (where)" appended, or ", where" inside an existing "(...)".
  Status with_context(const std::string& where) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

template <typename... Args>
Status make_error(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hf2pte

/// Returns an error Status (or Result) when `cond` is false:
///   HF2PTE_CHECK_OR_RETURN(n <= cap, kOutOfRange, "tensor too large; expected <= {}, got {}", cap, n);
#define HF2PTE_CHECK_OR_RETURN(cond, code, ...)                                   \
  do {                                                                            \
    if (!(cond)) return ::hf2pte::make_error(::hf2pte::ErrorCode::code, __VA_ARGS__); \
  } while (0)

/// Propagates a failed Status.
#define HF2PTE_RETURN_IF_ERROR(expr)             \
  do {                                           \
    ::hf2pte::Status _st = (expr);               \
    if (!_st.is_ok()) return _st;                \
  } while (0)

#define HF2PTE_CONCAT_INNER_(a, b) a##b
#define HF2PTE_CONCAT_(a, b) HF2PTE_CONCAT_INNER_(a, b)
/// `HF2PTE_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its Status.
#define HF2PTE_ASSIGN_OR_RETURN(lhs, expr) \
  HF2PTE_ASSIGN_OR_RETURN_IMPL_(HF2PTE_CONCAT_(_res_, __LINE__), lhs, expr)
#define HF2PTE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.is_ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
