/// \file
/// CPU kernels for the classification losses: cross_entropy (log_softmax and the negative
/// log-likelihood fused in one pass) and nll_loss, forward and backward. Their CUDA twins are
/// in tensor/ops/cuda/loss_kernels.h.
///
/// Every tensor but the target has the input's dtype, f16 and bf16 included: a 16-bit input
/// is computed in float, with sums in double, and each output element (log-probability, loss,
/// gradient) is rounded to 16 bits once.
#pragma once

#include "tensor/tensor.h"

namespace lockstep::cpu {

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

}  // namespace lockstep::cpu
