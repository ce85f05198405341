/// \file
/// The kernels behind max(), max(dim) and argmax(): a reduction that remembers *where* the
/// largest element was, and the backward pass that sends each gradient back to that place. Both
/// backends compare with tensor/ops/rules/max_rule.h, so they pick the same winner.
///
/// Both see a tensor as (outer, n, inner) around the reduced dimension `dim`: shape [2, 5, 3]
/// with dim 1 is outer 2, n 5, inner 3, and one output per (outer, inner) pair.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// values[o, i] = max over j of a[o, j, i] and indices[o, i] = the first j where it occurs,
/// a NaN counting as larger than everything (as in PyTorch). `a` may have any layout and any
/// dtype, f16 and bf16 included (compared as floats); `values` (a's dtype) and `indices` (i64)
/// are contiguous, outer * inner long. The reduced dimension must not be empty.
void max_kernel(const Tensor& a, int64_t dim, const Tensor& values, const Tensor& indices);

/// The gradient of max(dim): grad_input is zero except grad_input[o, indices[o, i], i] =
/// grad[o, i]. `grad_input` is contiguous and floating (f16 and bf16 included; `grad` has its
/// dtype) and its shape gives (outer, n, inner); `grad` and `indices` hold outer * inner
/// elements in any layout.
void max_backward_kernel(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& grad_input);

}  // namespace cpu

namespace cuda {

/// cpu::max_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void max_kernel(const Tensor& a, int64_t dim, const Tensor& values, const Tensor& indices))
/// cpu::max_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void max_backward_kernel(const Tensor& grad, const Tensor& indices, int64_t dim,
                                          const Tensor& grad_input))

}  // namespace cuda

namespace kernels {

/// Max and its position along one dimension.
inline constexpr auto max = device_kernels(cpu::max_kernel, cuda::max_kernel);
/// The gradient of max along one dimension.
inline constexpr auto max_backward = device_kernels(cpu::max_backward_kernel, cuda::max_backward_kernel);

}  // namespace kernels

}  // namespace lockstep
