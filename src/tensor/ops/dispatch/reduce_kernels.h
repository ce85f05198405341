/// \file
/// The kernel behind sum() and mean().
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include <vector>

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// out[kept index] = sum of `a` over the dimensions with reduce[d] true; out is contiguous with
/// the kept dimensions (keepdim or not, its layout is the same). Floats accumulate in double
/// into an `out` of a's dtype: an f16 or bf16 sum is accumulated in double (f32 would do too)
/// and rounded to 16 bits once, so an f16 sum beyond 65504 is inf. Integers and bools
/// accumulate in int64, into an i64 `out`.
void sum_kernel(const Tensor& a, const std::vector<bool>& reduce, const Tensor& out);

}  // namespace cpu

namespace cuda {

/// cpu::sum_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void sum_kernel(const Tensor& a, const std::vector<bool>& reduce, const Tensor& out))

}  // namespace cuda

namespace kernels {

/// Sum over a set of dimensions.
inline constexpr auto sum = device_kernels(cpu::sum_kernel, cuda::sum_kernel);

}  // namespace kernels

}  // namespace lockstep
