/// \file
/// CUDA kernels for max_pool2d: the forward pass finds each window's maximum and its position, the
/// backward pass sends each output's gradient back to that position. Same functions, parameters and
/// results as the CPU kernels in tensor/ops/cpu/pool_kernels.h; every tensor lives on one CUDA
/// device.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// out[n, c, oh, ow] = max of input[n, c, h, w] over the window starting at
/// (oh * stride - padding, ow * stride - padding), and indices[n, c, oh, ow] = h * W + w of
/// that maximum (the first one in row-major order on ties; a NaN wins). input: (N, C, H, W)
/// floating (f32, f64, f16 or bf16), any strides; out: (N, C, OH, OW) contiguous, same dtype;
/// indices: same shape, i64.
LOCKSTEP_CUDA_FN(void max_pool2d_kernel(const Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding,
                                        const Tensor& out, const Tensor& indices))

/// grad_input[n, c, indices[n, c, oh, ow]] += grad_output[n, c, oh, ow] for every output
/// element. grad_output: (N, C, OH, OW), any strides; indices: the forward's, contiguous, from
/// the window kernel_size, stride, padding; grad_input: (N, C, H, W), contiguous; it is
/// overwritten. Each input element gathers its shares from the windows covering it in row-major
/// order, so that overlapping windows (stride < kernel_size) give the CPU kernel's sums, bit for
/// bit and on every run. A 16-bit gradient is summed in f32 and rounded once.
LOCKSTEP_CUDA_FN(void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, int64_t kernel_size,
                                                 int64_t stride, int64_t padding, const Tensor& grad_input))

}  // namespace lockstep::cuda
