/// \file
/// CUDA kernels behind max(), max(dim) and argmax(): the same functions, parameters and
/// results as the CPU kernels in tensor/ops/cpu/max_kernels.h (first position on ties, a NaN larger
/// than everything); every tensor lives on one CUDA device.
///
/// Both see a tensor as (outer, n, inner) around the reduced dimension `dim`.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// values[o, i] = max over j of a[o, j, i] and indices[o, i] = the first j where it occurs.
/// `a` may have any layout and any numeric dtype, f16 and bf16 included; `values` (a's dtype)
/// and `indices` (i64) are contiguous, outer * inner long. The reduced dimension must not be
/// empty.
LOCKSTEP_CUDA_FN(void max_kernel(const Tensor& a, int64_t dim, const Tensor& values, const Tensor& indices))

/// The gradient of max(dim): grad_input is zero except grad_input[o, indices[o, i], i] =
/// grad[o, i]. `grad_input` is contiguous and floating (f16 and bf16 too; grad has its dtype)
/// and its shape gives (outer, n, inner);
/// `grad` and `indices` hold outer * inner elements in any layout.
LOCKSTEP_CUDA_FN(void max_backward_kernel(const Tensor& grad, const Tensor& indices, int64_t dim,
                                          const Tensor& grad_input))

}  // namespace lockstep::cuda
