/// \file
/// CUDA kernels for the classification losses: cross_entropy (log_softmax and the negative
/// log-likelihood fused) and nll_loss, forward and backward. Same functions, parameters and
/// results as the CPU kernels in tensor/ops/cpu/loss_kernels.h; every tensor lives on one CUDA
/// device.
///
/// One difference: the CPU ops refuse a class index outside [0, C) before running. On a GPU
/// that check would stall the CPU until the targets were copied back, so instead these kernels
/// make the loss NaN when any row's target is out of range (and that row's gradient NaN);
/// they never read or write outside the tensors.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// Cross entropy with mean reduction, fused: log_probs = log_softmax(logits) along dim 1, and
/// loss = mean over rows i of -log_probs[i, target[i]], reduced on the device. logits: (N, C)
/// floating, any layout; target: (N) i64; log_probs: (N, C) contiguous; loss: 0-d, logits' dtype.
/// For f16 and bf16 logits log_probs and loss are 16-bit too, and all arithmetic runs in float
/// (the sums in double), each stored value rounded once.
LOCKSTEP_CUDA_FN(void cross_entropy_kernel(const Tensor& logits, const Tensor& target,
                                           const Tensor& log_probs, const Tensor& loss))

/// The gradient of cross_entropy_kernel: grad_logits = grad / N * (exp(log_probs) -
/// onehot(target)), where grad is the 0-d gradient of the loss (read on the device).
/// grad_logits: (N, C) contiguous.
LOCKSTEP_CUDA_FN(void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                                    const Tensor& grad_logits))

/// Negative log-likelihood with mean reduction: loss = mean over rows i of
/// -log_probs[i, target[i]]. log_probs: (N, C) floating, any layout; target: (N) i64;
/// loss: 0-d, log_probs' dtype.
LOCKSTEP_CUDA_FN(void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss))

/// The gradient of nll_loss_kernel: grad_log_probs = -grad / N * onehot(target), where grad is
/// the 0-d gradient of the loss (read on the device). grad_log_probs: (N, C) contiguous.
LOCKSTEP_CUDA_FN(void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs))

}  // namespace lockstep::cuda
