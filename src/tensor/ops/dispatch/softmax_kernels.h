/// \file
/// The kernels of softmax and log_softmax along one dimension (forward and backward); the
/// losses built on them are in loss_kernels.h.
///
/// Softmax works on *lines*: the n elements along `dim` that share all other indices. A
/// contiguous tensor of shape [2, 5, 3] with dim 1 holds 2 * 3 lines of 5 elements, each 3
/// apart in memory; with dim the last, the lines are the contiguous rows. A 0-d tensor (dim 0)
/// is one line of one element.
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

/// out = softmax(x) (or log_softmax(x) if `log`) along `dim`. `x` is floating, any layout;
/// `out` is contiguous with x's shape and dtype. f16 and bf16 lines are computed in float and
/// each output is rounded once (the sums in double).
void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out);

/// The gradient of softmax_kernel, from the saved output y and the output gradient dy:
/// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy), the sums
/// along `dim`. `grad` and `out` may have any layout; `grad_input` is contiguous. All three have
/// one dtype; f16 and bf16 are computed in float, as the forward pass.
void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input);

}  // namespace cpu

namespace cuda {

/// cpu::softmax_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out))
/// cpu::softmax_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log,
                                              const Tensor& grad_input))

}  // namespace cuda

namespace kernels {

/// softmax or log_softmax along one dimension.
inline constexpr auto softmax = device_kernels(cpu::softmax_kernel, cuda::softmax_kernel);
/// The gradient of softmax or log_softmax.
inline constexpr auto softmax_backward = device_kernels(cpu::softmax_backward_kernel, cuda::softmax_backward_kernel);

}  // namespace kernels

}  // namespace lockstep
