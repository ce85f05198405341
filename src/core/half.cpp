#include "core/half.h"

#include <cstring>

namespace lockstep {

namespace {
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

uint16_t float_to_half_bits(float value) {
  const uint32_t u = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t exponent = (u >> 23) & 0xFFu;
  uint32_t mantissa = u & 0x7FFFFFu;

  // NaN keeps a quiet mantissa bit; infinity stays infinity.
  if (exponent == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mantissa ? 0x200u : 0u));

  // Re-bias the exponent from float's 127 to half's 15.
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;

  // Too large for half (even after rounding): infinity.
  if (half_exponent >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00u);

  if (half_exponent <= 0) {
    // Subnormal half (or zero): shift the mantissa, with its implicit 1, right by the deficit.
    if (half_exponent < -10) return sign;  // smaller than half the smallest subnormal: zero
    mantissa |= 0x800000u;
    const int shift = 14 - half_exponent;  // 13 to drop to 10 bits, plus the deficit
    const uint32_t halfway = 1u << (shift - 1);
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t result = mantissa >> shift;
    // Round to nearest, ties to even.
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }

  // Normal half: keep the top 10 mantissa bits and round on the 13 dropped ones.
  uint32_t result = (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1FFFu;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;

  if (exponent == 0x1F) return bits_float(sign | 0x7F800000u | (mantissa << 13));  // inf / NaN
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);  // signed zero
    // Subnormal half: value = mantissa * 2^-24, exactly representable as a normal float.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t u = float_bits(value);
  // NaN: keep it a (quiet) NaN; rounding could otherwise turn it into infinity.
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  // Round to nearest even on the 16 dropped bits: add 0x7FFF plus the lowest kept bit.
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

}  // namespace lockstep
