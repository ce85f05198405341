/// \file
/// The CUDA side of copy.h: the strided copy, fill, axpy and scale kernels that Tensor's own
/// methods use on `cuda:N`, and the one function that moves bytes between the CPU and a GPU or
/// between GPUs.
///
/// The copy, fill, axpy and scale kernels run on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensor's device current
/// before it calls one. copy_between_devices picks its devices itself.
#pragma once

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// dst[i] = src[i] on one CUDA device, converting the dtype; src broadcasts to dst's shape.
LOCKSTEP_CUDA_FN(void copy_kernel(const Tensor& src, const Tensor& dst))
/// dst[i] = value on a CUDA device.
LOCKSTEP_CUDA_FN(void fill_kernel(const Tensor& dst, double value))
/// dst[i] += alpha * src[i] on one CUDA device (floating, same dtype; src broadcasts). A 16-bit
/// dst is updated in float and rounded once.
LOCKSTEP_CUDA_FN(void axpy_kernel(double alpha, const Tensor& src, const Tensor& dst))
/// dst[i] *= value on a CUDA device (floating; a 16-bit dst is scaled in float, rounded once).
LOCKSTEP_CUDA_FN(void scale_kernel(double value, const Tensor& dst))
/// Copies the bytes of contiguous `src` into contiguous `dst` (same dtype and numel) when at
/// least one is on a GPU: host to device, device to host, or device to device. The copy is
/// queued on the GPU's current stream. A copy to or from the host returns, unless
/// `non_blocking`, only when the data has arrived; a non-blocking one from or to pinned memory
/// lets the CPU run ahead, while from pageable memory CUDA itself makes the host wait while it
/// stages the data. A copy between GPUs never waits: both GPUs' streams are ordered around it.
LOCKSTEP_CUDA_FN(void copy_between_devices(const Tensor& src, const Tensor& dst, bool non_blocking))

}  // namespace lockstep::cuda
