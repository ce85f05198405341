/// \file
/// Dropout's mask on the CPU. Its CUDA twin (tensor/ops/cuda/dropout_kernels.h) has the same
/// signature but draws its bits with a counter-based generator, so the two devices give
/// different masks for one seed, each reproducible on its own.
#pragma once

#include "core/generator.h"
#include "tensor/tensor.h"

namespace lockstep::cpu {

/// Writes dropout's mask into `mask` (floating, any layout, f16 and bf16 included): element i
/// is `scale` (rounded to the mask's dtype) where kept and 0 where dropped. Element i is kept
/// when the i-th uniform float64 drawn from `generator` (the default generator if null), in
/// row-major order, is below 1 - p: probability 1 - p. The draws do not depend on the mask's
/// dtype, so one seed drops the same elements in f32 and in bf16.
void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator);

}  // namespace lockstep::cpu
