/// \file
/// Philox-4x32-10, the counter-based random number generator behind dropout's mask, and the
/// rule that turns its words into the mask, written once for the CPU kernel
/// (tensor/ops/cpu/dropout_kernels.cpp) and the CUDA kernel (tensor/ops/cuda/dropout_kernels.cu),
/// so that both draw the same mask for the same seed.
///
/// A generator such as std::mt19937_64 is a sequence: number k + 1 comes from the state left by
/// number k, so threads would have to take turns. A counter-based generator is a pure function
/// instead, random bits = f(key, counter): every thread computes the bits of its own elements
/// from their index, with no shared state and no ordering, and the result cannot depend on how
/// many threads there are or how the work is split among them. Lockstep uses Philox-4x32-10
/// (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
/// generator behind PyTorch's and cuRAND's GPU dropout.
#pragma once

#include <cmath>
#include <cstdint>
#include <mutex>

#include "core/generator.h"
#include "core/host_device.h"

namespace lockstep {

/// Four 32-bit words: a Philox counter, or the four random words it maps to.
struct Philox4x32 {
  uint32_t word[4];  ///< the words, word[0] first
};

/// The high and low 32 bits of the 64-bit product a * b (Philox's only nonlinear step).
LOCKSTEP_HOST_DEVICE void philox_mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

/// Philox-4x32-10: maps a 128-bit `counter` and a 64-bit `key` to 128 random bits, in ten
/// rounds of two 32 x 32 -> 64-bit multiplications whose halves are XORed into the other words
/// and the key, which grows by a Weyl sequence (the golden ratio and sqrt(3) - 1 in fixed
/// point) between rounds. The constants are those of the paper and of the Random123 library,
/// whose known answers it reproduces; e.g. counter 0 and key 0 give 6627e8d5 e169c58d bc57ac4c
/// 9b00dbd8. key's low 32 bits are Random123's key[0], its high 32 bits key[1].
LOCKSTEP_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 counter, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mul_hi_lo(0xD2511F53u, counter.word[0], hi0, lo0);
    philox_mul_hi_lo(0xCD9E8D57u, counter.word[2], hi1, lo1);
    counter = Philox4x32{{hi1 ^ counter.word[1] ^ k0, lo1, hi0 ^ counter.word[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return counter;
}

/// The counter of group `group` of a draw at `offset`: the words (offset low, offset high,
/// group low, group high). Distinct (offset, group) pairs give distinct counters, so no two
/// groups of one key share their random words.
LOCKSTEP_HOST_DEVICE Philox4x32 philox_counter(uint64_t offset, uint64_t group) {
  return Philox4x32{{static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), static_cast<uint32_t>(group),
                     static_cast<uint32_t>(group >> 32)}};
}

/// The Philox key of one dropout mask: one 64-bit draw from `generator` (the default generator
/// if null, locked while it draws when threads share it), so the seed fixes the mask and the
/// next mask gets a new key. Both kernels call it exactly once per mask, even for an empty one,
/// so a generator moves on by the same one draw on either device.
inline uint64_t dropout_key(Generator* generator) {
  const auto lock = lock_default_generator(generator);
  return (generator != nullptr ? *generator : default_generator()).next();
}

/// The threshold that keeps an element with probability 1 - p: round((1 - p) * 2^32). A 32-bit
/// word, uniform on [0, 2^32), falls below t with probability t / 2^32, so the probability is
/// 1 - p to within 2^-33; with p = 0 (t = 2^32) every element is kept, with p = 1 (t = 0) none.
/// `p` must lie in [0, 1].
inline uint64_t dropout_threshold(double p) { return static_cast<uint64_t>(std::llround((1.0 - p) * 4294967296.0)); }

/// Dropout's rule for the four elements 4 * group .. 4 * group + 3 of a mask of `n` elements:
/// element i = 4 * group + j is `kept` when word j of philox4x32_10(philox_counter(offset,
/// group), key) is below `threshold` (dropout_threshold), and `dropped` otherwise. Elements at
/// or beyond n (in the last, partial group) are not written. An element's value depends on
/// (key, offset, i) alone, so any split of the groups among threads gives the same mask.
template <class T>
LOCKSTEP_HOST_DEVICE void dropout_mask_group(T* mask, int64_t n, int64_t group, uint64_t key, uint64_t offset,
                                             uint64_t threshold, T kept, T dropped) {
  const Philox4x32 bits = philox4x32_10(philox_counter(offset, static_cast<uint64_t>(group)), key);
  for (int j = 0; j < 4; ++j) {
    const int64_t i = 4 * group + j;
    if (i < n) mask[i] = static_cast<uint64_t>(bits.word[j]) < threshold ? kept : dropped;
  }
}

}  // namespace lockstep
