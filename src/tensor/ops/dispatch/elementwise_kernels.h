/// \file
/// The elementwise kernels. Each writes into a preallocated contiguous `out` whose shape is the
/// broadcast shape of the inputs; inputs may have any strides. The per-element formulas are
/// shared by both backends (tensor/ops/rules/elementwise_math.h).
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once


#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/ops/rules/elementwise_ops.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// out = op(a, b) with broadcasting; a and b share a floating dtype (out is bool for
/// comparisons); `name` is the op's name for error messages.
void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
/// out = op(a); a floating, out with a's shape and dtype (contiguous, or `a` itself: each element
/// is read before it is written, which relu_ relies on); `name` as above.
void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out);

}  // namespace cpu

namespace cuda {

/// cpu::binary_kernel on the current CUDA device; its comparisons also take any numeric dtype.
LOCKSTEP_CUDA_FN(void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b,
                                    const Tensor& out))
/// cpu::unary_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out))

}  // namespace cuda

namespace kernels {

/// out = op(a, b) with broadcasting.
inline constexpr auto binary = device_kernels(cpu::binary_kernel, cuda::binary_kernel);
/// out = op(a).
inline constexpr auto unary = device_kernels(cpu::unary_kernel, cuda::unary_kernel);

}  // namespace kernels

}  // namespace lockstep
