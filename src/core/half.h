// The two 16-bit float element types as C++ value types, so kernels can name
// them in templates: storage is the IEEE half / bfloat16 bit pattern, and
// arithmetic happens in float (a value converts to float implicitly and is
// rounded once, to nearest even, when a float is stored back).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace hf2pte {

inline float bf16_to_float(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return uint16_t((bits + rounding) >> 16);
}

inline float half_to_float(uint16_t h) {
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

inline uint16_t float_to_half(float f) {
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

/// A 16-bit float type: the bits of `kNarrow(f)`, read back by `kWiden`.
template <uint16_t (*kNarrow)(float), float (*kWiden)(uint16_t)>
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  Float16(float f) : bits(kNarrow(f)) {}          // NOLINT: implicit, like c10::Half
  operator float() const { return kWiden(bits); }  // NOLINT
  static Float16 from_bits(uint16_t b) {
    Float16 v;
    v.bits = b;
    return v;
  }
};

/// bfloat16: the upper half of a float32.
using BFloat16 = Float16<float_to_bf16, bf16_to_float>;
/// IEEE 754 binary16.
using Half = Float16<float_to_half, half_to_float>;

static_assert(sizeof(BFloat16) == 2 && sizeof(Half) == 2);

/// Half and BFloat16: stored in 16 bits, computed in float.
template <typename T>
inline constexpr bool is_half_type_v = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

}  // namespace hf2pte
