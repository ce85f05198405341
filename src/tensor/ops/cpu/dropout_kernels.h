/// \file
/// Dropout's mask on the CPU, drawn with the counter-based generator Philox
/// (tensor/ops/rules/philox.h). Its CUDA twin (tensor/ops/cuda/dropout_kernels.h) has the same
/// signature and calls the same rule, so the two devices draw the same mask for one seed.
#pragma once

#include "core/generator.h"
#include "tensor/tensor.h"

namespace lockstep::cpu {

/// Writes dropout's mask into `mask` (contiguous, on the CPU, f32, f64, f16 or bf16): element i
/// is `scale` (rounded to the mask's dtype) where kept and 0 where dropped. One 64-bit draw from
/// `generator` (the default generator if null) is the Philox key (dropout_key), and element i is
/// kept when word i % 4 of philox4x32_10(philox_counter(0, i / 4), key) is below
/// dropout_threshold(p) = round((1 - p) * 2^32): probability 1 - p. The mask depends on (key, i)
/// alone: not on the number of threads, and not on the dtype, so one seed drops the same elements
/// in f32 and in bf16, and on the CPU and a GPU. `p` must lie in [0, 1].
void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator);

}  // namespace lockstep::cpu
