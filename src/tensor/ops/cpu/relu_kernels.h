/// \file
/// ReLU's CPU kernels: the forward pass writes the output and the mask of the elements it let
/// through (tensor/ops/kernels/relu_mask.h has its layout), and the backward pass reads that
/// mask instead of the output.
#pragma once

#include "tensor/ops/kernels/relu_mask.h"
#include "tensor/tensor.h"

namespace lockstep::cpu {

/// out = relu(input), the bits of UnaryOp::Relu (0 where input <= 0, NaN kept, f16 and bf16
/// compared as floats), and mask's bit i set where input i is > 0 or NaN. input: floating,
/// contiguous; out: contiguous, input's shape and dtype, or input itself (relu_); mask: u8,
/// contiguous, relu_mask_bytes(input.numel()) bytes, all of them written.
void relu_kernel(const Tensor& input, const Tensor& out, const Tensor& mask);

/// grad_input i = grad_output i where mask's bit i is set, else 0. grad_output: floating,
/// contiguous; mask: as relu_kernel wrote it for a tensor of as many elements; grad_input:
/// contiguous, grad_output's shape and dtype.
void relu_backward_kernel(const Tensor& grad_output, const Tensor& mask, const Tensor& grad_input);

}  // namespace lockstep::cpu
