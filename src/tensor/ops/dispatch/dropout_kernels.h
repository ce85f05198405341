/// \file
/// Dropout's mask kernel, drawn with the counter-based generator Philox
/// (tensor/ops/rules/philox.h). A CPU generator such as std::mt19937_64 is a sequence, number
/// k + 1 coming from the state left by number k, so a million GPU threads would have to take
/// turns; Philox is a pure function instead, random bits = f(key, counter), so every thread (and
/// every CPU thread) computes the bits of its own elements from their index. Both backends call
/// the same rule, so they draw the same mask for one seed.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include "core/cuda/api.h"
#include "core/generator.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// Writes dropout's mask into `mask` (contiguous, f32, f64, f16 or bf16): element i is `scale`
/// (rounded to the mask's dtype) where kept and 0 where dropped. One 64-bit draw from
/// `generator` (the default generator if null) is the Philox key (dropout_key), and element i is
/// kept when word i % 4 of philox4x32_10(philox_counter(0, i / 4), key) is below
/// dropout_threshold(p) = round((1 - p) * 2^32): probability 1 - p. The mask depends on (key, i)
/// alone: not on the number of threads or the launch configuration, and not on the dtype, so
/// one seed drops the same elements in f32 and in bf16, and on the CPU and a GPU. `p` must lie
/// in [0, 1].
void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator);

}  // namespace cpu

namespace cuda {

/// cpu::dropout_mask_kernel on the current CUDA device: the same mask for the same seed.
LOCKSTEP_CUDA_FN(void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator))

}  // namespace cuda

namespace kernels {

/// Dropout's mask: the same on both devices for one seed.
inline constexpr auto dropout_mask = device_kernels(cpu::dropout_mask_kernel, cuda::dropout_mask_kernel);

}  // namespace kernels

}  // namespace lockstep
