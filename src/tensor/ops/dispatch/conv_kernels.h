/// \file
/// conv2d's kernels: im2col, its adjoint col2im, and the forward and backward passes built
/// from them and a GEMM. For one image and a stride s and padding p:
///
///     cols (C_in*kH*kW, H_out*W_out)    column (oh, ow) = the input patch under the filter
///                                       at output pixel (oh, ow), row (c, i, j) = pixel
///                                       x[c, oh*s - p + i, ow*s - p + j] (0 in the padding)
///     y  (C_out, H_out*W_out) = W (C_out, C_in*kH*kW) . cols            forward
///     dW (C_out, C_in*kH*kW) += dy (C_out, H_out*W_out) . cols^T        backward, weight
///     dx = col2im(W^T (C_in*kH*kW, C_out) . dy (C_out, H_out*W_out))    backward, input
///
/// Images are independent, so the forward pass splits the batch into one share per thread;
/// inside a share each image is one im2col and one GEMM (conv_kernels.cpp says why this split
/// was chosen). The backward pass splits it into at most 16 groups fixed by the batch size, so
/// that dW, a sum over the images, is added in the same order whatever the thread count.
/// Images of fewer than 32 output pixels (ResNet-50's last stages) go in chunks of consecutive
/// images instead, their columns side by side in one GEMM: (patch, m * pixels) for m images.
///
/// f16 and bf16 tensors are multiplied by cpu::gemm_16bit, whose sums are f32: an image's
/// output (bias included), its input gradient and dW's sum over the batch stay f32 until each
/// is rounded to the 16-bit dtype once.
///
/// A GPU (cuda::gemm) unfolds a chunk of images at once into one im2col matrix
/// (C_in*kH*kW, images*H_out*W_out) instead, so that each GEMM is large enough to fill it;
/// chunks keep that matrix to a bounded size. Its 16-bit products sum in f32 on tensor cores.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/ops/rules/conv_geometry.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// Writes cols (patch_size, out_pixels): the patch under the filter at every output pixel of
/// one image x (C_in, H, W), as described in this file's header. Padding reads as 0.
/// Instantiated for float, double, Half and BFloat16.
template <class T>
void im2col(const T* x, const Conv2dGeometry& g, T* cols);

/// The adjoint of im2col: adds every entry of cols (patch_size, out_pixels) onto the pixel of
/// x (C_in, H, W) it would have been copied from (entries from the padding are dropped). A pixel
/// that lies in several patches receives the sum. Instantiated for float and double.
template <class T>
void col2im(const T* cols, const Conv2dGeometry& g, T* x);

/// out (N, C_out, H_out, W_out) = input (N, C_in, H, W) convolved with weight
/// (C_out, C_in, kH, kW), plus bias (C_out) per channel if bias is defined. All contiguous,
/// one floating dtype (f32, f64, f16 or bf16).
void conv2d_forward_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                           const Conv2dGeometry& g);

/// From grad_out dy (N, C_out, H_out, W_out), writes grad_input dx (N, C_in, H, W) and
/// grad_weight dW (C_out, C_in, kH, kW, summed over the batch). Either output may be undefined,
/// and is then not computed. All tensors contiguous, one floating dtype (f32, f64, f16 or bf16).
void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const Tensor& grad_input, const Tensor& grad_weight, const Conv2dGeometry& g);

}  // namespace cpu

namespace cuda {

/// cpu::conv2d_forward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void conv2d_forward_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                            const Tensor& out, const Conv2dGeometry& g))
/// cpu::conv2d_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                                             const Tensor& grad_input, const Tensor& grad_weight,
                                             const Conv2dGeometry& g))

}  // namespace cuda

namespace kernels {

/// conv2d's forward pass.
inline constexpr auto conv2d_forward = device_kernels(cpu::conv2d_forward_kernel, cuda::conv2d_forward_kernel);
/// conv2d's backward pass.
inline constexpr auto conv2d_backward = device_kernels(cpu::conv2d_backward_kernel, cuda::conv2d_backward_kernel);

}  // namespace kernels

}  // namespace lockstep
