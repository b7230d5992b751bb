// ScalarType: the tensor element types, numbered as c10/ExecuTorch number them
// (the .pte stores these bytes directly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/half.h"

namespace hf2pte {

enum class ScalarType : int8_t {
  kByte = 0,
  kChar = 1,
  kShort = 2,
  kInt = 3,
  kLong = 4,
  kHalf = 5,
  kFloat = 6,
  kDouble = 7,
  kBool = 11,
  kQInt8 = 12,
  kQUInt8 = 13,
  kQInt32 = 14,
  kBFloat16 = 15,
  kUInt16 = 27,
  kUInt32 = 28,
  kUInt64 = 29,
};

/// Bytes per element, or 0 for types we do not support.
size_t element_size(ScalarType t);
/// Short lowercase name used in dumps and errors ("f32", "i64", "bool", "bf16").
std::string_view scalar_type_name(ScalarType t);
/// True for the c10 codes we know (a .pte byte outside this set is invalid).
bool is_known_scalar_type(int code);
bool is_floating(ScalarType t);
/// `v` rounded to float type `t` (f32, or f16/bf16 through f32) and widened back;
/// `v` itself for every other type.
double round_to(ScalarType t, double v);


}  // namespace hf2pte
