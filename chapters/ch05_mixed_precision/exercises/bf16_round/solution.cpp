// Exercise ch05_bf16_round: the reference solution.
#include <cstdint>
#include <cstring>

#include "lockstep.h"

namespace exercise {

uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);  // memcpy, not a pointer cast: the only defined way to read the bits
  // NaN first: the rounding below could carry its mantissa into the exponent (inf) or, from
  // 0x7FFFFFFF, wrap to the other sign. Keeping the top bits and setting the quiet bit keeps a
  // signalling NaN whose payload lives only in the dropped bits a NaN, and never traps later.
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  // Round to nearest on the 16 dropped bits. Adding 0x7FFF carries into the kept bits exactly
  // when the dropped bits are above one half (0x8000); at exactly one half, the extra 1 (the
  // lowest kept bit) carries only when that bit is odd, so a tie goes to the even neighbour.
  // A carry out of the mantissa lands in the exponent, which is the next binade's first value,
  // or inf past the largest finite bf16: the integer add gets both right, and infinities (all
  // dropped bits 0) stay as they are.
  const uint32_t lowest_kept_bit = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lowest_kept_bit) >> 16);
}

}  // namespace exercise
