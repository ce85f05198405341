/// \file
/// CUDA kernels for conv2d: the same functions, parameters and results as the CPU kernels in
/// tensor/ops/cpu/conv_kernels.h (both take the Conv2dGeometry of
/// tensor/ops/kernels/conv_geometry.h), built the same way from im2col, col2im and GEMM
/// (cuda::gemm), with every tensor on one CUDA device.
///
/// The difference is the batch: instead of one small GEMM per image, the GPU unfolds a chunk of
/// images at once into one im2col matrix (C_in*kH*kW, images*H_out*W_out), so that each GEMM
/// is large enough to fill the GPU. Chunks keep that matrix to a bounded size.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include "core/cuda/api.h"
#include "tensor/ops/kernels/conv_geometry.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// out (N, C_out, H_out, W_out) = input (N, C_in, H, W) convolved with weight
/// (C_out, C_in, kH, kW), plus bias (C_out) per channel if bias is defined. All contiguous,
/// on one CUDA device, one floating dtype (f32, f64, f16 or bf16: a 16-bit convolution sums in
/// f32 on tensor cores and rounds each output once). Same as cpu::conv2d_forward_kernel.
LOCKSTEP_CUDA_FN(void conv2d_forward_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                            const Tensor& out, const Conv2dGeometry& g))

/// From grad_out dy (N, C_out, H_out, W_out), writes grad_input dx (N, C_in, H, W) and
/// grad_weight dW (C_out, C_in, kH, kW, summed over the batch). Either output may be undefined,
/// and is then not computed. All tensors contiguous, on one CUDA device, one floating dtype;
/// 16-bit gradients are summed in f32 (dW over the whole batch) and rounded once. Same as
/// cpu::conv2d_backward_kernel.
LOCKSTEP_CUDA_FN(void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                                             const Tensor& grad_input, const Tensor& grad_weight,
                                             const Conv2dGeometry& g))

}  // namespace lockstep::cuda
