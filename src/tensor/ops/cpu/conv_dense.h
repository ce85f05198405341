/// \file
/// conv2d on images no larger than its filter, as one dense matrix product over the batch.
///
/// A convolution is a linear map from an image's C_in * H * W values to its output's
/// C_out * H_out * W_out values. Written out as a matrix, the dense operator
/// D: (C_out * H_out * W_out, C_in * H * W), entry (co, o; ci, p) is the filter tap that joins
/// input pixel p to output pixel o, weight[co, ci, i, j] with (i, j) = p - o * stride + padding,
/// or 0 where no tap does. For images with no more pixels than the filter has taps (ResNet-50's
/// last stages on Fashion-MNIST: 2 x 2 and 1 x 1 images under 3 x 3 filters), D has no more
/// entries per channel pair than im2col's product multiplies (H * W against kH * kW per output
/// pixel), and the batch, (N, C_in * H * W) as it lies, multiplies it in one GEMM: no im2col, no
/// col2im, no chunks of images copied side by side.
///
///     forward:          y (N, C_out H_out W_out)   = x (N, C_in H W) . D^T  (+ bias)
///     input gradient:   dx (N, C_in H W)           = dy (N, C_out H_out W_out) . D
///     weight gradient:  dD (C_out H_out W_out, C_in H W) = dy^T . x, and dW[co, ci, i, j] the
///                       sum of the entries of dD that tap (i, j) made, o ascending, then p.
///
/// Each is a sum in a fixed order whatever the thread count (cpu::gemm's is), in the dtype's
/// opmath type (f32 for the 16-bit dtypes, rounded once). Internal to the CPU conv2d kernels,
/// which call it where conv2d_runs_dense() says.
#pragma once

#include "tensor/ops/rules/conv_geometry.h"
#include "tensor/tensor.h"

namespace lockstep::cpu {

/// Whether the CPU conv2d kernels run `g` as a dense product: where the input image has no more
/// pixels than the filter has taps (H * W <= kH * kW).
bool conv2d_runs_dense(const Conv2dGeometry& g);

/// conv2d_forward_kernel's contract (conv_kernels.h), by the dense product.
void conv2d_dense_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                          const Conv2dGeometry& g);

/// conv2d_backward_kernel's contract (conv_kernels.h), by the dense product.
void conv2d_dense_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                           const Tensor& grad_input, const Tensor& grad_weight, const Conv2dGeometry& g);

}  // namespace lockstep::cpu
