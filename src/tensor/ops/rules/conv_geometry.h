/// \file
/// The sizes of one 2-D convolution, which conv2d computes once and hands to the CPU and the
/// CUDA kernels alike (tensor/ops/dispatch/conv_kernels.h).
#pragma once

#include <cstdint>

namespace lockstep {

/// The sizes of one 2-D convolution, per image (the batch size is the tensors' dimension 0).
struct Conv2dGeometry {
  int64_t channels = 0;  ///< Input channels C_in.
  int64_t height = 0;    ///< Input height H.
  int64_t width = 0;     ///< Input width W.
  int64_t kernel_h = 0;  ///< Filter height kH.
  int64_t kernel_w = 0;  ///< Filter width kW.
  int64_t stride = 1;    ///< Step between neighbouring output pixels, in input pixels.
  int64_t padding = 0;   ///< Zeros added on every side of the input.
  int64_t out_h = 0;     ///< Output height, (H + 2 padding - kH) / stride + 1.
  int64_t out_w = 0;     ///< Output width, (W + 2 padding - kW) / stride + 1.

  /// Rows of the im2col matrix: values in one patch, C_in * kH * kW.
  int64_t patch_size() const { return channels * kernel_h * kernel_w; }
  /// Columns of the im2col matrix: output pixels per channel, H_out * W_out.
  int64_t out_pixels() const { return out_h * out_w; }
  /// Values in one input image, C_in * H * W.
  int64_t image_size() const { return channels * height * width; }
};

}  // namespace lockstep
