/// \file
/// CUDA kernel behind sum() and mean(): the same function, parameters and results as
/// cpu::sum_kernel (tensor/ops/cpu/reduce_kernels.h); every tensor lives on one CUDA device.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include <vector>

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// out[kept index] = sum of `a` over the dimensions with reduce[d] true; `a` may have any
/// layout, `out` is contiguous with the kept dimensions. Floats accumulate in double (as on
/// the CPU; f16 and bf16 too) and the sum has a's dtype, rounded to it once; integers and bools
/// sum exactly into an i64 `out`.
LOCKSTEP_CUDA_FN(void sum_kernel(const Tensor& a, const std::vector<bool>& reduce, const Tensor& out))

}  // namespace lockstep::cuda
