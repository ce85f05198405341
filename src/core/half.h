/// \file
/// The two 16-bit floating-point formats used by mixed precision, and their exact conversions
/// to and from float with round-to-nearest-even (what the hardware does).
///
///     f16  (IEEE binary16):  1 sign | 5 exponent | 10 mantissa   max 65504, eps 2^-10
///     bf16 (brain float):    1 sign | 8 exponent |  7 mantissa   float's range, eps 2^-7
#pragma once

#include <cstdint>

namespace lockstep {

/// Converts a float to IEEE half-precision bits, rounding to nearest even; overflow gives inf,
/// tiny values become subnormals or zero, NaN stays NaN.
uint16_t float_to_half_bits(float value);
/// Converts IEEE half-precision bits to the float with exactly the same value.
float half_bits_to_float(uint16_t bits);
/// Converts a float to bfloat16 bits (the top 16 bits of the float, rounded to nearest even).
uint16_t float_to_bfloat16_bits(float value);
/// Converts bfloat16 bits to the float with exactly the same value.
float bfloat16_bits_to_float(uint16_t bits);

/// A half-precision (f16) number stored as its 16 bits; converts to and from float.
struct Half {
  uint16_t bits = 0;  ///< The raw IEEE binary16 bits.
  /// Zero.
  Half() = default;
  /// Rounds `value` to the nearest half.
  Half(float value) : bits(float_to_half_bits(value)) {}  // NOLINT: implicit like a built-in float type
  /// The exact float value.
  operator float() const { return half_bits_to_float(bits); }
};

/// A bfloat16 (bf16) number stored as its 16 bits; converts to and from float.
struct BFloat16 {
  uint16_t bits = 0;  ///< The raw bfloat16 bits (the top half of a float).
  /// Zero.
  BFloat16() = default;
  /// Rounds `value` to the nearest bfloat16.
  BFloat16(float value) : bits(float_to_bfloat16_bits(value)) {}  // NOLINT: implicit like a built-in float type
  /// The exact float value.
  operator float() const { return bfloat16_bits_to_float(bits); }
};

}  // namespace lockstep
