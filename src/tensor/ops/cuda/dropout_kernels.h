/// \file
/// Dropout's mask on a GPU, drawn with a counter-based random number generator.
///
/// A CPU generator such as std::mt19937_64 is a sequence: number k + 1 comes from the state
/// left by number k, so a million threads would have to take turns. A counter-based generator
/// is a pure function instead, random bits = f(key, counter): every thread computes the bits of
/// its own elements from their index, with no shared state and no ordering. Lockstep uses
/// Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
/// SC 2011), the generator behind PyTorch's and cuRAND's GPU dropout.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "core/host_device.h"
#include "core/generator.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

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

/// Writes dropout's mask into `mask` (contiguous, on a GPU, f32, f64, f16 or bf16): element i is
/// `scale` where kept and 0 where dropped, in mask's dtype. One 64-bit draw from `generator`
/// (the default generator if null) is the Philox key, so the seed fixes the mask. Elements come
/// in groups of four: the counter of group g = i / 4 is (0, g), as the words (0, 0, g low,
/// g high), and element i is kept when word i % 4 of philox4x32_10(counter, key) is below
/// round((1 - p) * 2^32), which happens with probability 1 - p (to 2^-32). The mask depends on
/// (key, i) alone, never on the launch configuration. `p` must lie in [0, 1]. The CPU kernel
/// with this signature (tensor/ops/cpu/dropout_kernels.h) draws its mask differently.
LOCKSTEP_CUDA_FN(void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator))

}  // namespace lockstep::cuda
