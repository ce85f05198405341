/// \file
/// FNV-1a, the one 64-bit hash Lockstep uses wherever bytes are compared by a short number: a
/// checkpoint's checksum (io/checkpoint.h), the values ranks compare with each other
/// (distributed/rank_agreement.h) and a collective's caller in its fingerprint
/// (distributed/collective_info.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep {

/// FNV-1a's 64-bit offset basis: the hash of no bytes, where a hash starts.
inline constexpr uint64_t kFnv1aOffsetBasis = 14695981039346656037ull;

/// FNV-1a, 64 bits, of the `size` bytes at `data`, continuing from `hash`: the hash of bytes
/// before them, or kFnv1aOffsetBasis to start. So hashing two blocks in turn gives the hash of
/// the two joined. Not cryptographic: a changed bit changes the hash with overwhelming
/// probability, so it tells data damaged by accident (bit rot, a copy cut short) or values
/// that differ between ranks from equal ones, but it guards against no attack.
inline uint64_t fnv1a(const void* data, size_t size, uint64_t hash = kFnv1aOffsetBasis) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;  // FNV's 64-bit prime
  }
  return hash;
}

}  // namespace lockstep
