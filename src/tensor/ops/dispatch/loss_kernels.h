/// \file
/// The classification losses' kernels: cross_entropy (log_softmax and the negative
/// log-likelihood fused in one pass) and nll_loss, forward and backward.
///
/// Every tensor but the target has the input's dtype, f16 and bf16 included: a 16-bit input
/// is computed in float, with sums in double, and each output element (log-probability, loss,
/// gradient) is rounded to 16 bits once. The losses are reduced on the tensors' device, and a
/// 0-d gradient is read there too.
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

/// Cross entropy with mean reduction, fused: log_probs = log_softmax(logits) along dim 1, and
/// loss = mean over rows i of -log_probs[i, target[i]]. logits: (N, C) floating, any layout;
/// target: (N) i64, every entry in [0, C); log_probs: (N, C) contiguous; loss: 0-d, logits'
/// dtype.
void cross_entropy_kernel(const Tensor& logits, const Tensor& target, const Tensor& log_probs, const Tensor& loss);

/// The gradient of cross_entropy_kernel: grad_logits = grad / N * (exp(log_probs) -
/// onehot(target)), where grad is the 0-d gradient of the loss. grad_logits: (N, C) contiguous.
void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                   const Tensor& grad_logits);

/// Negative log-likelihood with mean reduction: loss = mean over rows i of
/// -log_probs[i, target[i]]. log_probs: (N, C) floating, any layout; target: (N) i64 in [0, C);
/// loss: 0-d, log_probs' dtype.
void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss);

/// The gradient of nll_loss_kernel: grad_log_probs = -grad / N * onehot(target), where grad is
/// the 0-d gradient of the loss. grad_log_probs: (N, C) contiguous.
void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs);

}  // namespace cpu

namespace cuda {

/// cpu::cross_entropy_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void cross_entropy_kernel(const Tensor& logits, const Tensor& target,
                                           const Tensor& log_probs, const Tensor& loss))
/// cpu::cross_entropy_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                                    const Tensor& grad_logits))
/// cpu::nll_loss_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss))
/// cpu::nll_loss_backward_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs))

}  // namespace cuda

namespace kernels {

/// Cross entropy with mean reduction.
inline constexpr auto cross_entropy = device_kernels(cpu::cross_entropy_kernel, cuda::cross_entropy_kernel);
/// The gradient of cross entropy.
inline constexpr auto cross_entropy_backward =
    device_kernels(cpu::cross_entropy_backward_kernel, cuda::cross_entropy_backward_kernel);
/// Negative log-likelihood with mean reduction.
inline constexpr auto nll_loss = device_kernels(cpu::nll_loss_kernel, cuda::nll_loss_kernel);
/// The gradient of the negative log-likelihood.
inline constexpr auto nll_loss_backward = device_kernels(cpu::nll_loss_backward_kernel, cuda::nll_loss_backward_kernel);

}  // namespace kernels

}  // namespace lockstep
