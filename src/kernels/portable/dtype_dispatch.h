// The one place where a runtime ScalarType becomes a C++ element type.
//
// Kernels never switch on dtypes themselves (docs/STYLE.md §4 rule 7): they
// call `dispatch<kSet>(dtype, op, what, f)` with a generic lambda that
// receives a `TypeTag<T>`. The allowed set is a template argument so that
// only the listed types are instantiated: a lambda that adds numbers is never
// compiled for `bool` unless the op says bool is allowed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/scalar_type.h"
#include "core/status.h"
#include "ops/op_table.h"

namespace hf2pte::kernels {

/// A C++ element type carried as a value, so generic lambdas can name it:
/// `[&](auto tag) { using T = typename decltype(tag)::type; ... }`.
template <typename T>
struct TypeTag {
  using type = T;
};

/// A set of dtypes, usable as a template argument (a structural type).
struct DTypeSet {
  uint64_t bits = 0;

  static constexpr uint64_t bit(ScalarType t) { return uint64_t(1) << unsigned(int(t) & 63); }
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<ScalarType> types) {
    for (ScalarType t : types) bits |= bit(t);
  }
  constexpr bool contains(ScalarType t) const { return (bits & bit(t)) != 0; }
  constexpr DTypeSet operator|(DTypeSet o) const {
    DTypeSet r;
    r.bits = bits | o.bits;
    return r;
  }
  /// "f32, i64, bool" for error messages.
  std::string to_string() const;
};

inline constexpr DTypeSet kFloatOnly{ScalarType::kFloat};
/// The float element types a program may hold: f32 and the two 16-bit types
/// (stored in 16 bits, computed in float, rounded once per result).
inline constexpr DTypeSet kFloating{ScalarType::kFloat, ScalarType::kHalf, ScalarType::kBFloat16};
/// Types the arithmetic kernels compute in (f16/bf16 results are computed in f32).
inline constexpr DTypeSet kArith{ScalarType::kFloat, ScalarType::kLong};
/// Types data-movement and comparison kernels accept: f32, f16, bf16, i64, bool.
inline constexpr DTypeSet kStandard{ScalarType::kFloat, ScalarType::kHalf, ScalarType::kBFloat16, ScalarType::kLong,
                                    ScalarType::kBool};

/// The type a result of dtype `t` is computed in: f32 for every float type
/// (what ATen's CPU kernels do for f16/bf16), `t` otherwise.
constexpr ScalarType compute_type(ScalarType t) {
  return (t == ScalarType::kHalf || t == ScalarType::kBFloat16) ? ScalarType::kFloat : t;
}
/// Index tensors (embedding, index_select, index_put_).
inline constexpr DTypeSet kIndex{ScalarType::kLong, ScalarType::kInt};

/// The kernel key ("aten::add.out") of an op, as a view into a table built once.
std::string_view op_key(OpId id);

/// kNotSupported "aten::mean.out: self has dtype i64; expected one of f32".
Status unsupported_dtype(OpId op, std::string_view what, ScalarType t, DTypeSet allowed);

/// Calls `f(TypeTag<T>{})` for the C++ type T of `t` when `t` is in `kAllowed`;
/// otherwise returns kNotSupported naming the op, the argument and the dtype.
/// `f` returns Status (or void, mapped to ok).
template <DTypeSet kAllowed, typename F>
Status dispatch(ScalarType t, OpId op, std::string_view what, F&& f) {
  auto call = [&](auto tag) -> Status {
    if constexpr (std::is_void_v<decltype(f(tag))>) {
      f(tag);
      return Status::ok();
    } else {
      return f(tag);
    }
  };
  if constexpr (kAllowed.contains(ScalarType::kFloat)) {
    if (t == ScalarType::kFloat) return call(TypeTag<float>{});
  }
  if constexpr (kAllowed.contains(ScalarType::kHalf)) {
    if (t == ScalarType::kHalf) return call(TypeTag<Half>{});
  }
  if constexpr (kAllowed.contains(ScalarType::kBFloat16)) {
    if (t == ScalarType::kBFloat16) return call(TypeTag<BFloat16>{});
  }
  if constexpr (kAllowed.contains(ScalarType::kLong)) {
    if (t == ScalarType::kLong) return call(TypeTag<int64_t>{});
  }
  if constexpr (kAllowed.contains(ScalarType::kInt)) {
    if (t == ScalarType::kInt) return call(TypeTag<int32_t>{});
  }
  if constexpr (kAllowed.contains(ScalarType::kBool)) {
    if (t == ScalarType::kBool) return call(TypeTag<bool>{});
  }
  return unsupported_dtype(op, what, t, kAllowed);
}

/// float, double, Half or BFloat16.
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_type_v<T>;

/// Reads one element. Bool is read through its byte so that a stored value
/// other than 0/1 (hostile data) is not undefined behaviour.
template <typename T>
inline T load(const T* p) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b;
    std::memcpy(&b, p, 1);
    return b != 0;
  } else {
    return *p;
  }
}

/// Value conversion with defined results everywhere: float -> integer maps
/// NaN and out-of-range values to the minimum (what x86 cvttss2si yields, so
/// it matches PyTorch on CPU) instead of being undefined behaviour.
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_type_v<From>) {
    return convert<To>(float(v));  // exact widening, then the float rules
  } else if constexpr (is_half_type_v<To>) {
    return To(convert<float>(v));  // one rounding, from float
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // 2^63 and 2^31 are exact in float and double.
    constexpr From kHi = From(std::numeric_limits<To>::max()) + From(1);
    if (!(v >= -kHi && v < kHi)) return std::numeric_limits<To>::min();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace hf2pte::kernels
