/// \file
/// The CPU side of copy.h: the strided copy, fill, axpy and scale kernels that Tensor's own
/// methods use on the CPU. Same functions and parameters as tensor/cuda/copy_kernels.h.
#pragma once

#include "tensor/tensor.h"

namespace lockstep::cpu {

/// dst[i] = src[i] on the CPU, converting the dtype; src broadcasts to dst's shape.
void copy_kernel(const Tensor& src, const Tensor& dst);
/// dst[i] = value on the CPU.
void fill_kernel(const Tensor& dst, double value);
/// dst[i] += alpha * src[i] on the CPU (floating, same dtype; src broadcasts).
void axpy_kernel(double alpha, const Tensor& src, const Tensor& dst);
/// dst[i] *= value on the CPU (floating).
void scale_kernel(double value, const Tensor& dst);

}  // namespace lockstep::cpu
