/// \file
/// CPU kernel behind sum() and mean(); tensor/ops/cuda/reduce_kernels.h declares its CUDA twin.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace lockstep::cpu {

/// out[kept index] = sum of `a` over the dimensions with reduce[d] true; out is contiguous with
/// the kept dimensions (keepdim or not, its layout is the same). Floats accumulate in double
/// into an `out` of a's dtype: an f16 or bf16 sum is accumulated in double (f32 would do too)
/// and rounded to 16 bits once, so an f16 sum beyond 65504 is inf. Integers and bools
/// accumulate in int64, into an i64 `out`.
void sum_kernel(const Tensor& a, const std::vector<bool>& reduce, const Tensor& out);

}  // namespace lockstep::cpu
