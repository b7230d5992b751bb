#include "core/scalar_type.h"

#include <cmath>
#include <cstring>

namespace hf2pte {

size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::kByte: case ScalarType::kChar: case ScalarType::kBool:
    case ScalarType::kQInt8: case ScalarType::kQUInt8: return 1;
    case ScalarType::kShort: case ScalarType::kHalf: case ScalarType::kBFloat16:
    case ScalarType::kUInt16: return 2;
    case ScalarType::kInt: case ScalarType::kFloat: case ScalarType::kQInt32:
    case ScalarType::kUInt32: return 4;
    case ScalarType::kLong: case ScalarType::kDouble: case ScalarType::kUInt64: return 8;
  }
  return 0;
}

std::string_view scalar_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::kByte: return "u8";
    case ScalarType::kChar: return "i8";
    case ScalarType::kShort: return "i16";
    case ScalarType::kInt: return "i32";
    case ScalarType::kLong: return "i64";
    case ScalarType::kHalf: return "f16";
    case ScalarType::kFloat: return "f32";
    case ScalarType::kDouble: return "f64";
    case ScalarType::kBool: return "bool";
    case ScalarType::kQInt8: return "qi8";
    case ScalarType::kQUInt8: return "qu8";
    case ScalarType::kQInt32: return "qi32";
    case ScalarType::kBFloat16: return "bf16";
    case ScalarType::kUInt16: return "u16";
    case ScalarType::kUInt32: return "u32";
    case ScalarType::kUInt64: return "u64";
  }
  return "?";
}

bool is_known_scalar_type(int code) {
  switch (code) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 11: case 12: case 13:
    case 14: case 15: case 27: case 28: case 29: return true;
    default: return false;
  }
}

bool is_floating(ScalarType t) {
  return t == ScalarType::kHalf || t == ScalarType::kFloat || t == ScalarType::kDouble ||
         t == ScalarType::kBFloat16;
}

double round_to(ScalarType t, double v) {
  switch (t) {
    case ScalarType::kFloat: return double(float(v));
    case ScalarType::kHalf: return double(half_to_float(float_to_half(float(v))));
    case ScalarType::kBFloat16: return double(bf16_to_float(float_to_bf16(float(v))));
    default: return v;
  }
}

}  // namespace hf2pte
