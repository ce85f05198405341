/// \file
/// max_pool2d's kernels: the forward pass finds each window's maximum and its position, the
/// backward pass sends gradients back to those positions. The CPU works one (n, c) plane at a
/// time, so planes run in parallel.
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

/// out[n, c, oh, ow] = max of input[n, c, h, w] over the window starting at
/// (oh * stride - padding, ow * stride - padding), and indices[n, c, oh, ow] = h * W + w of
/// that maximum (its position inside its plane, as PyTorch stores it). input: (N, C, H, W)
/// floating (f16 and bf16 compared as floats), any strides; out: (N, C, OH, OW) contiguous, same
/// dtype; indices: same shape, i64.
void max_pool2d_kernel(const Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding, const Tensor& out,
                       const Tensor& indices);

/// grad_input[n, c, indices[n, c, oh, ow]] += grad_output[n, c, oh, ow] for every output
/// element, the shares of one input element added in row-major window order. grad_output:
/// (N, C, OH, OW), any strides; indices: the forward's, contiguous; grad_input: (N, C, H, W),
/// contiguous, grad_output's dtype; it is overwritten (zero where no window took its maximum).
/// Shares that land on one f16 or bf16 element are added in float and rounded once. The window
/// (kernel_size, stride, padding) is the forward's: the CUDA kernel gathers through it, while this
/// one scatters through the indices alone and does not read it.
void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, int64_t kernel_size, int64_t stride,
                                int64_t padding, const Tensor& grad_input);

}  // namespace cpu

namespace cuda {

/// cpu::max_pool2d_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void max_pool2d_kernel(const Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding,
                                        const Tensor& out, const Tensor& indices))
/// cpu::max_pool2d_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, int64_t kernel_size,
                                                 int64_t stride, int64_t padding, const Tensor& grad_input))

}  // namespace cuda

namespace kernels {

/// max_pool2d's forward pass.
inline constexpr auto max_pool2d = device_kernels(cpu::max_pool2d_kernel, cuda::max_pool2d_kernel);
/// max_pool2d's backward pass.
inline constexpr auto max_pool2d_backward =
    device_kernels(cpu::max_pool2d_backward_kernel, cuda::max_pool2d_backward_kernel);

}  // namespace kernels

}  // namespace lockstep
