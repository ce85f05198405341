/// \file
/// 2-D convolution, torch.nn.functional.conv2d (as in PyTorch, really a cross-correlation: the
/// filter is not flipped).
///
/// Computed by im2col + GEMM. Written directly, a convolution is seven nested loops of short
/// dot products (C_in x kH x kW values each) over scattered memory, which no compiler turns
/// into fast code. im2col copies each patch the filter sees into a column of a matrix; after
/// that, every output channel at every output pixel of an image is one entry of a single
/// matrix product W (C_out, C_in*kH*kW) x cols (C_in*kH*kW, H_out*W_out), and matrix product
/// is the fastest kernel we have (cpu::gemm: cache-blocked, vectorised, multithreaded). The
/// copy costs kH*kW times the image's memory and a little time; the GEMM more than pays for
/// it. The backward pass is two more GEMMs of the same shapes (see tensor/ops/dispatch/conv_kernels.h).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace lockstep {

/// Convolves input (N, C_in, H, W) with weight (C_out, C_in, kH, kW) and adds bias (C_out)
/// to every pixel of each output channel (pass an undefined Tensor for no bias). `padding`
/// zeros are added on every side; the filter moves `stride` pixels at a time. Returns
/// (N, C_out, H_out, W_out) with H_out = (H + 2 padding - kH) / stride + 1, likewise W_out.
///
/// Backward: dW = sum over images of dy . cols^T, dx = col2im(W^T . dy) (only computed when
/// input requires grad: a network's input images do not), dbias = dy summed over N, H, W.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0);

}  // namespace lockstep
