// Exercise ch05_bf16_round: the test of the student's float_to_bf16 (starter.cpp or the file
// given with FILE=...). Every expected value comes from a reference written here from the
// definition of rounding, in double arithmetic: find the two bf16 values around x and take the
// nearer, the even one on a tie. It shares no code with the bit trick the exercise asks for, so
// the two check each other; the library's own conversion is compared last.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "lockstep.h"

namespace exercise {
/// The bfloat16 bits of `x`, rounded to nearest, ties to even; NaN stays a quiet NaN (the
/// function the student writes).
uint16_t float_to_bf16(float x);
}  // namespace exercise

namespace lockstep {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::string hex(uint32_t u, int digits) {
  std::ostringstream out;
  out << "0x" << std::uppercase << std::hex << std::setw(digits) << std::setfill('0') << u;
  return out.str();
}

// How a failure names its input: the float's bits and its value, which %g alone would round.
std::string describe(float x) {
  std::ostringstream out;
  out << hex(to_bits(x), 8) << " (" << std::setprecision(9) << x << ")";
  return out.str();
}

bool is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

/// The bf16 bits nearest to the finite or infinite float `x`, ties to even, from the definition
/// and not from bit tricks. Not for NaN, which has no nearest value.
uint16_t reference_bf16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));  // every float is exact in double
  if (std::isinf(a)) return sign | 0x7F80;
  if (a == 0.0) return sign;
  // bf16 keeps 8 significant bits (the implicit 1 and 7 stored), so in the binade
  // [2^e, 2^(e+1)) its values are 2^(e-7) apart. Below 2^-126 the subnormals keep that
  // spacing, 2^-133, down to zero.
  int e = std::ilogb(a);
  if (e < -126) e = -126;
  const double ulp = std::ldexp(1.0, e - 7);
  // a / ulp is exact (a power of two), so are the floor and both distances below: a has 24
  // significant bits and lo is a multiple of ulp no more than a.
  const double m = std::floor(a / ulp);
  const double lo = m * ulp, hi = lo + ulp;
  const double below = a - lo, above = hi - a;
  // On a tie, the even neighbour: lo's mantissa is m's low bits (m is in [128, 256) for a
  // normal value, [0, 128) for a subnormal), so lo is even exactly when m is.
  const bool round_up = above < below || (above == below && std::fmod(m, 2.0) != 0.0);
  const double r = round_up ? hi : lo;
  // Past the largest finite bf16, (2 - 2^-7) * 2^127, the next value up is 2^128: inf.
  if (r >= std::ldexp(1.0, 128)) return sign | 0x7F80;
  // r is a bf16 value, so as a float it is exact and its low 16 bits are zero.
  const uint32_t bits = to_bits(static_cast<float>(r));
  return sign | static_cast<uint16_t>(bits >> 16);
}

/// The student's result for `x` against the reference: exact bits, or for a NaN any quiet NaN
/// of the same sign. Returns an empty string when they agree, else the sentence a failure shows.
std::string check(float x) {
  const uint16_t got = exercise::float_to_bf16(x);
  const uint32_t in = to_bits(x);
  if (is_nan_bits(in)) {
    const bool nan = (got & 0x7F80) == 0x7F80 && (got & 0x007F) != 0;
    const bool quiet = (got & 0x0040) != 0;
    const bool same_sign = (got & 0x8000) == ((in >> 16) & 0x8000);
    if (nan && quiet && same_sign) return "";
    return "float_to_bf16(" + describe(x) + ") = " + hex(got, 4) +
           ": a NaN must stay a NaN of the same sign with the quiet bit 0x0040 set (e.g. " +
           hex(((in >> 16) | 0x40u) & 0xFFFFu, 4) + ")";
  }
  const uint16_t want = reference_bf16(x);
  if (got == want) return "";
  return "float_to_bf16(" + describe(x) + ") = " + hex(got, 4) + ", expected " + hex(want, 4) +
         " (truncation would give " + hex(in >> 16, 4) + ")";
}

#define EXPECT_BF16(x)                     \
  do {                                     \
    const std::string failure = check(x);  \
    EXPECT_TRUE(failure.empty()) << failure; \
  } while (0)

// Checks every float in a batch, but stops reporting after a few failures: one wrong branch
// fails thousands of the random inputs, and the first ones say all there is to say.
template <class Next>
void expect_all(int64_t count, Next next) {
  int failures = 0;
  for (int64_t i = 0; i < count; ++i) {
    const std::string failure = check(next(i));
    if (failure.empty()) continue;
    if (++failures <= 5) ADD_FAILURE() << failure;
  }
  EXPECT_EQ(failures, 0) << "of " << count << " inputs, " << failures << " were rounded wrongly (the first ones are above)";
}

TEST(Bf16Round, ValuesThatAreAlreadyBf16AreKept) {
  // Floats whose low 16 bits are zero are bf16 values: rounding must give their top bits back.
  for (float x : {1.0f, -1.0f, 2.5f, -0.15625f, 256.0f, 1.0f / 64, -96.0f,
                  from_bits(0x3F810000u), from_bits(0x7F7F0000u), from_bits(0x00800000u),
                  from_bits(0x00010000u), from_bits(0x80550000u)}) {
    EXPECT_EQ(exercise::float_to_bf16(x), to_bits(x) >> 16) << "float_to_bf16(" << describe(x) << ")";
    EXPECT_BF16(x);
  }
}

TEST(Bf16Round, TruncationIsNotRounding) {
  // 0.1f is 0x3DCCCCCD. Truncated, 0x3DCC is 0.099609375; rounded, 0x3DCD is 0.10009765625,
  // four times nearer. The dropped bits 0xCCCD are above one half, so the kept bits go up.
  EXPECT_EQ(exercise::float_to_bf16(0.1f), 0x3DCD)
      << "0.1f = 0x3DCCCCCD should round up to 0x3DCD; 0x3DCC is truncation, which always rounds toward zero";
  // 1 + 2^-8 + 2^-20 is just past the middle of 1 (0x3F80) and 1 + 2^-7 (0x3F81).
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F808010u)), 0x3F81);
  EXPECT_EQ(exercise::float_to_bf16(-1.0f / 3.0f), 0xBEAB) << "-1/3 = 0xBEAAAAAB rounds to 0xBEAB";
}

TEST(Bf16Round, TheErrorHasNoBias) {
  // Truncation's error is always toward zero: on values spread over [1, 2), it averages
  // -2^-8, half the bf16 spacing there. Rounding to nearest averages zero; with 100000 values,
  // its mean stays within a few times 1e-5 of it.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(1.0f, 2.0f);
  double sum = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float x = uniform(rng);
    uint32_t bits = static_cast<uint32_t>(exercise::float_to_bf16(x)) << 16;
    sum += static_cast<double>(from_bits(bits)) - x;
  }
  EXPECT_LT(std::fabs(sum / n), 1e-4) << "the mean error over " << n << " values in [1, 2) is " << sum / n
                                       << "; truncation gives about -0.0039 = -2^-8";
}

TEST(Bf16Round, ExactlyHalfwayGoesToTheEvenNeighbour) {
  // Dropped bits exactly 0x8000: the two neighbours are equally near, and the one with an even
  // last mantissa bit wins, so ties go down as often as up.
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F808000u)), 0x3F80) << "1 + 2^-8: a tie between 0x3F80 (even) and 0x3F81";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F818000u)), 0x3F82) << "1 + 3 * 2^-8: a tie between 0x3F81 and 0x3F82 (even)";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0xBF808000u)), 0xBF80) << "-(1 + 2^-8): ties to even on either sign";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0xBF818000u)), 0xBF82) << "-(1 + 3 * 2^-8): ties to even on either sign";
  // A tie whose carry crosses into the next binade: 0x3FFF is odd, so up to 0x4000 = 2.0.
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3FFF8000u)), 0x4000) << "2 - 2^-8: a tie that rounds up to 2.0";
  for (uint32_t high : {0x0000u, 0x0001u, 0x0080u, 0x3F80u, 0x3F81u, 0x4B7Fu, 0x7F7Eu, 0x8001u, 0xC2FFu})
    EXPECT_BF16(from_bits((high << 16) | 0x8000u));
}

TEST(Bf16Round, JustBelowAndJustAboveHalfway) {
  // One float either side of a tie is no tie: below rounds down, above rounds up, whatever the
  // parity.
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F807FFFu)), 0x3F80);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F817FFFu)), 0x3F81);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3F818001u)), 0x3F82);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0xC0007FFFu)), 0xC000);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0xC0008001u)), 0xC001);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x3FFFFFFFu)), 0x4000) << "just below 2.0 rounds to 2.0";
}

TEST(Bf16Round, TheLargestFiniteValueAndOverflowToInfinity) {
  // The largest finite bf16 is 0x7F7F = (2 - 2^-7) * 2^127, about 3.39e38; float goes a little
  // further, to 0x7F7FFFFF. Past the middle between 0x7F7F and 2^128, the nearest value is
  // 2^128, which bf16 cannot hold: the result is inf, as for any rounding past the top.
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x7F7F0000u)), 0x7F7F);
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x7F7F7FFFu)), 0x7F7F) << "below the middle: the largest finite bf16";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x7F7F8000u)), 0x7F80) << "the tie: 0x7F7F is odd, so up, to inf";
  EXPECT_EQ(exercise::float_to_bf16(std::numeric_limits<float>::max()), 0x7F80) << "FLT_MAX rounds to inf in bf16";
  EXPECT_EQ(exercise::float_to_bf16(-std::numeric_limits<float>::max()), 0xFF80) << "-FLT_MAX rounds to -inf";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0xFF7F7FFFu)), 0xFF7F);
}

TEST(Bf16Round, SmallestNormalAndSubnormals) {
  // bf16 has float's exponent, so float's subnormals are bf16's too, with 7 mantissa bits
  // instead of 23; they round by the same rule.
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x00800000u)), 0x0080) << "the smallest normal, 2^-126";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x00010000u)), 0x0001) << "the smallest bf16 subnormal, 2^-133";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x00008000u)), 0x0000) << "half of 2^-133: a tie, down to +0 (even)";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x00008001u)), 0x0001) << "just above half of 2^-133";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x00018000u)), 0x0002) << "a tie between 0x0001 and 0x0002 (even)";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x007FFFFFu)), 0x0080) << "the largest float subnormal rounds up to the smallest normal";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x00000001u)), 0x0000) << "the smallest float subnormal, 2^-149, rounds to +0";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x80000001u)), 0x8000) << "-2^-149 rounds to -0: the sign stays";
  EXPECT_EQ(exercise::float_to_bf16(from_bits(0x807FFFFFu)), 0x8080);
}

TEST(Bf16Round, SignedZerosAndInfinities) {
  EXPECT_EQ(exercise::float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(exercise::float_to_bf16(-0.0f), 0x8000) << "-0 keeps its sign bit";
  EXPECT_EQ(exercise::float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(exercise::float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(Bf16Round, NaNStaysAQuietNaN) {
  // Quiet NaNs, and signalling ones (quiet bit 0x00400000 clear) whose payload may sit only in
  // the dropped bits: rounded like numbers, 0x7F800001 would become inf and 0x7FFFFFFF would
  // carry out of the sign bit into -0.
  for (uint32_t u : {0x7FC00000u, 0xFFC00000u, 0x7FC00001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F800001u,
                     0xFF800001u, 0x7F80FFFFu, 0x7FBFFFFFu, 0x7FA00000u, 0xFF808000u}) {
    EXPECT_BF16(from_bits(u));
  }
  EXPECT_BF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_BF16(std::numeric_limits<float>::signaling_NaN());
}

TEST(Bf16Round, EveryBinadeAroundItsTies) {
  // Every one of the 65536 upper halves, with the dropped bits at and around the middle and at
  // the ends: every exponent, both signs, both parities, infinities and NaNs.
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
  expect_all(65536 * 6, [&](int64_t i) { return from_bits((static_cast<uint32_t>(i / 6) << 16) | lows[i % 6]); });
}

TEST(Bf16Round, AMillionRandomBitPatterns) {
  std::mt19937 rng(28);
  expect_all(1000000, [&](int64_t) { return from_bits(static_cast<uint32_t>(rng())); });
}

TEST(Bf16Round, AgreesWithTheLibrary) {
  // lockstep's float_to_bfloat16_bits (src/core/half.h) is the conversion every bf16 tensor
  // uses; the student's function should give the same bits on every number. (NaNs are left to
  // NaNStaysAQuietNaN: any quiet NaN of the right sign is a right answer, not only the library's.)
  std::mt19937 rng(5);
  int failures = 0;
  for (int i = 0; i < 100000; ++i) {
    const float x = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const uint16_t got = exercise::float_to_bf16(x), want = float_to_bfloat16_bits(x);
    if (got != want && ++failures <= 5)
      ADD_FAILURE() << "float_to_bf16(" << describe(x) << ") = " << hex(got, 4) << ", the library gives " << hex(want, 4);
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace lockstep
