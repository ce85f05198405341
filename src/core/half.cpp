#include "core/half.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define LOCKSTEP_HAVE_F16C_PATH 1
#endif

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

namespace {

#ifdef LOCKSTEP_HAVE_F16C_PATH
// Whether this CPU has the F16C conversions, asked once.
bool cpu_has_f16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    // F16C is CPUID leaf 1's ECX bit 29, read directly: Clang before 15 has no "f16c" for
    // __builtin_cpu_supports. AVX is asked by name, which also checks that the operating system
    // saves the AVX registers.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx") != 0;
  }();
  return has;
}

// Eight values per instruction; compiled for F16C with a function attribute, so that this file
// builds for any x86-64 and the path runs only where cpu_has_f16c() says it may.
__attribute__((target("avx,f16c"))) void half_to_float_f16c(const Half* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_bits_to_float(in[i].bits);
}

__attribute__((target("avx,f16c"))) void float_to_half_f16c(const float* in, Half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i].bits = float_to_half_bits(in[i]);
}
#endif

}  // namespace

void half_to_float(const Half* in, float* out, int64_t n) {
#ifdef LOCKSTEP_HAVE_F16C_PATH
  if (cpu_has_f16c()) return half_to_float_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = half_bits_to_float(in[i].bits);
}

void float_to_half(const float* in, Half* out, int64_t n) {
#ifdef LOCKSTEP_HAVE_F16C_PATH
  if (cpu_has_f16c()) return float_to_half_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i].bits = float_to_half_bits(in[i]);
}

}  // namespace lockstep
