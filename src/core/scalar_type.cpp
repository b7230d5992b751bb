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

float bf16_to_float(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return uint16_t((bits + rounding) >> 16);
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) { mant <<= 1; --exp; }
      mant &= 0x3FF;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7FFFFFFF;
  if (absx >= 0x7F800000) return uint16_t(sign | 0x7C00 | (absx > 0x7F800000 ? 0x200 : 0));
  if (absx >= 0x477FF000) return uint16_t(sign | 0x7C00);  // overflow -> inf
  if (absx < 0x38800000) {  // subnormal or zero in half
    float a;
    std::memcpy(&a, &absx, 4);
    return uint16_t(sign | uint16_t(std::nearbyint(a * 16777216.0f)));  // a / 2^-24
  }
  uint32_t mant_odd = (absx >> 13) & 1;
  absx += 0xC8000FFF + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return uint16_t(sign | (absx >> 13));
}

}  // namespace hf2pte
