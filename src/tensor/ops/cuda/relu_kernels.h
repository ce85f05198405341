/// \file
/// ReLU's CUDA kernels: the same functions, parameters and results as the CPU kernels in
/// tensor/ops/cpu/relu_kernels.h, the mask bit for bit included; every tensor lives on one
/// CUDA device.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include "core/cuda/api.h"
#include "tensor/ops/kernels/relu_mask.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// out = relu(input) and its mask, as cpu::relu_kernel: input contiguous, out contiguous with
/// its shape and dtype or input itself, mask u8 of relu_mask_bytes(input.numel()) bytes, all
/// written.
LOCKSTEP_CUDA_FN(void relu_kernel(const Tensor& input, const Tensor& out, const Tensor& mask))
/// grad_input = grad_output where the mask's bit is set, else 0, as cpu::relu_backward_kernel.
LOCKSTEP_CUDA_FN(void relu_backward_kernel(const Tensor& grad_output, const Tensor& mask, const Tensor& grad_input))

}  // namespace lockstep::cuda
