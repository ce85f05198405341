/// \file
/// The elementwise building blocks that Tensor itself needs (contiguous(), to(dtype), fill_,
/// copy_, add_, mul_): strided loops over one or two tensors on the same device. Each checks its
/// arguments and runs the kernel of their device (tensor/ops/dispatch/copy_kernels.h).
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// dst[i] = src[i] for every index of dst, converting the dtype; src must be broadcastable to
/// dst's shape. A src on another device is first copied to dst's device.
void copy_strided(const Tensor& src, const Tensor& dst);
/// dst[i] = value for every element of dst (any layout).
void fill_strided(const Tensor& dst, double value);
/// dst[i] += alpha * src[i] (src broadcastable to dst; both floating, same dtype and device).
void axpy_strided(double alpha, const Tensor& src, const Tensor& dst);
/// dst[i] *= value (floating dst).
void scale_strided(double value, const Tensor& dst);

}  // namespace lockstep
