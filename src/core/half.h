/// \file
/// The two 16-bit floating-point formats used by mixed precision, and their exact conversions
/// to and from float with round-to-nearest-even (what the hardware does).
///
///     f16  (IEEE binary16):  1 sign | 5 exponent | 10 mantissa   max 65504, eps 2^-10
///     bf16 (brain float):    1 sign | 8 exponent |  7 mantissa   float's range, eps 2^-7
#pragma once

#include <cstdint>
#include <cstring>

namespace lockstep {

/// Converts a float to IEEE half-precision bits, rounding to nearest even; overflow gives inf,
/// tiny values become subnormals or zero, NaN stays NaN.
uint16_t float_to_half_bits(float value);
/// Converts IEEE half-precision bits to the float with exactly the same value.
float half_bits_to_float(uint16_t bits);

struct Half;

/// Converts `n` halves to floats, exactly. On an x86-64 CPU with F16C (every one since 2012) it
/// converts 8 values per instruction (`vcvtph2ps`); elsewhere one at a time.
void half_to_float(const Half* in, float* out, int64_t n);
/// Rounds `n` floats to halves, to nearest even, as float_to_half_bits does; with F16C's
/// `vcvtps2ph` where the CPU has it.
void float_to_half(const float* in, Half* out, int64_t n);

// The bf16 conversions are inline: they are a few integer operations, and kernels that read and
// write bf16 in a loop (elementwise ops, im2col, casts) need them inlined to vectorise.

/// Converts a float to bfloat16 bits (the top 16 bits of the float, rounded to nearest even);
/// NaN stays a quiet NaN.
inline uint16_t float_to_bfloat16_bits(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  // Round to nearest even on the 16 dropped bits: add 0x7FFF plus the lowest kept bit.
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  // NaN: keep it a (quiet) NaN; rounding could otherwise turn it into infinity.
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : (rounded >> 16));
}

/// Converts bfloat16 bits to the float with exactly the same value.
inline float bfloat16_bits_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

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
