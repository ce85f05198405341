/// \file
/// Dropout's mask kernel.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "core/generator.h"
#include "core/host_device.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// Writes dropout's mask into `mask` (floating, any layout, f16 and bf16 included): element i
/// is `scale` (rounded to the mask's dtype) where kept and 0 where dropped. Element i is kept
/// when the i-th uniform float64 drawn from `generator` (the default generator if null), in
/// row-major order, is below 1 - p: probability 1 - p. The draws do not depend on the mask's
/// dtype, so one seed drops the same elements in f32 and in bf16.
void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator);

}  // namespace cpu

namespace cuda {

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


/// cpu::dropout_mask_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator))

}  // namespace cuda

namespace kernels {

/// Dropout's mask (the two devices draw different masks; see the kernels' headers).
inline constexpr auto dropout_mask = device_kernels(cpu::dropout_mask_kernel, cuda::dropout_mask_kernel);

}  // namespace kernels

}  // namespace lockstep
