/// \file
/// Dropout's mask on a GPU, drawn with the counter-based generator Philox
/// (tensor/ops/rules/philox.h): every thread computes the bits of its own elements from their
/// index, with no shared state and no ordering. The CPU kernel (tensor/ops/cpu/dropout_kernels.h)
/// calls the same rule, so the two devices draw the same mask for one seed.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include "core/cuda/api.h"
#include "core/generator.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// Writes dropout's mask into `mask` (contiguous, on a GPU, f32, f64, f16 or bf16): element i is
/// `scale` (rounded to the mask's dtype) where kept and 0 where dropped. One 64-bit draw from
/// `generator` (the default generator if null) is the Philox key (dropout_key), so the seed fixes
/// the mask. Elements come in groups of four: element i is kept when word i % 4 of
/// philox4x32_10(philox_counter(0, i / 4), key) is below dropout_threshold(p) = round((1 - p) *
/// 2^32), which happens with probability 1 - p. The mask depends on (key, i) alone, never on the
/// launch configuration, and equals the CPU kernel's (tensor/ops/cpu/dropout_kernels.h) for the
/// same seed. `p` must lie in [0, 1].
LOCKSTEP_CUDA_FN(void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator))

}  // namespace lockstep::cuda
