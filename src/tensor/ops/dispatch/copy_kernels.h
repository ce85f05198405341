/// \file
/// The strided copy, fill, axpy and scale kernels that Tensor's own methods use (copy_,
/// contiguous(), to(dtype), fill_, add_, mul_; tensor/copy.h checks their arguments), and the
/// one function that moves bytes between the CPU and a GPU or between GPUs.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// dst[i] = src[i] on the CPU, converting the dtype; src broadcasts to dst's shape.
void copy_kernel(const Tensor& src, const Tensor& dst);
/// dst[i] = value on the CPU.
void fill_kernel(const Tensor& dst, double value);
/// dst[i] += alpha * src[i] on the CPU (floating, same dtype; src broadcasts).
void axpy_kernel(double alpha, const Tensor& src, const Tensor& dst);
/// dst[i] *= value on the CPU (floating).
void scale_kernel(double value, const Tensor& dst);

}  // namespace cpu

namespace cuda {

/// cpu::copy_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void copy_kernel(const Tensor& src, const Tensor& dst))
/// cpu::fill_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void fill_kernel(const Tensor& dst, double value))
/// cpu::axpy_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void axpy_kernel(double alpha, const Tensor& src, const Tensor& dst))
/// cpu::scale_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void scale_kernel(double value, const Tensor& dst))
/// Copies the bytes of contiguous `src` into contiguous `dst` (same dtype and numel) when at
/// least one is on a GPU: host to device, device to host, or device to device. The copy is
/// queued on the GPU's current stream. A copy to or from the host returns, unless
/// `non_blocking`, only when the data has arrived; a non-blocking one from or to pinned memory
/// lets the CPU run ahead, while from pageable memory CUDA itself makes the host wait while it
/// stages the data. A copy between GPUs never waits: both GPUs' streams are ordered around it.
/// It picks its devices itself, and has no CPU twin.
LOCKSTEP_CUDA_FN(void copy_between_devices(const Tensor& src, const Tensor& dst, bool non_blocking))

}  // namespace cuda

namespace kernels {

/// dst = src, converting the dtype (copy_, contiguous, to(dtype)).
inline constexpr auto copy = device_kernels(cpu::copy_kernel, cuda::copy_kernel);
/// dst = value (fill_).
inline constexpr auto fill = device_kernels(cpu::fill_kernel, cuda::fill_kernel);
/// dst += alpha * src (add_).
inline constexpr auto axpy = device_kernels(cpu::axpy_kernel, cuda::axpy_kernel);
/// dst *= value (mul_).
inline constexpr auto scale = device_kernels(cpu::scale_kernel, cuda::scale_kernel);

}  // namespace kernels

}  // namespace lockstep
