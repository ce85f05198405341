/// \file
/// ReLU's kernels: the forward pass writes the output and the mask of the elements it let
/// through (tensor/ops/rules/relu_mask.h has its layout), and the backward pass reads that mask
/// instead of the output.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once


#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/ops/rules/relu_mask.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// out = relu(input), the bits of UnaryOp::Relu (0 where input <= 0, NaN kept, f16 and bf16
/// compared as floats), and mask's bit i set where input i is > 0 or NaN. input: floating,
/// contiguous; out: contiguous, input's shape and dtype, or input itself (relu_); mask: u8,
/// contiguous, relu_mask_bytes(input.numel()) bytes, all of them written.
void relu_kernel(const Tensor& input, const Tensor& out, const Tensor& mask);

/// grad_input i = grad_output i where mask's bit i is set, else 0. grad_output: floating,
/// contiguous; mask: as relu_kernel wrote it for a tensor of as many elements; grad_input:
/// contiguous, grad_output's shape and dtype.
void relu_backward_kernel(const Tensor& grad_output, const Tensor& mask, const Tensor& grad_input);

}  // namespace cpu

namespace cuda {

/// cpu::relu_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void relu_kernel(const Tensor& input, const Tensor& out, const Tensor& mask))
/// cpu::relu_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void relu_backward_kernel(const Tensor& grad_output, const Tensor& mask, const Tensor& grad_input))

}  // namespace cuda

namespace kernels {

/// relu, and the mask of what it let through (tensor/ops/rules/relu_mask.h).
inline constexpr auto relu = device_kernels(cpu::relu_kernel, cuda::relu_kernel);
/// relu's gradient, from that mask.
inline constexpr auto relu_backward = device_kernels(cpu::relu_backward_kernel, cuda::relu_backward_kernel);

}  // namespace kernels

}  // namespace lockstep
