/// \file
/// CPU kernels for softmax and log_softmax along one dimension (forward and backward), and for
/// the two losses built on them: cross_entropy (log_softmax and the negative log-likelihood
/// fused in one pass) and nll_loss.
///
/// Softmax works on *lines*: the n elements along `dim` that share all other indices. A
/// contiguous tensor of shape [2, 5, 3] with dim 1 holds 2 * 3 lines of 5 elements, each 3
/// apart in memory; with dim the last, the lines are the contiguous rows. A 0-d tensor (dim 0)
/// is one line of one element.
#pragma once

#include "tensor/tensor.h"

namespace lockstep::cpu {

/// out = softmax(x) (or log_softmax(x) if `log`) along `dim`. `x` is floating, any layout;
/// `out` is contiguous with x's shape and dtype.
void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out);

/// The gradient of softmax_kernel, from the saved output y and the output gradient dy:
/// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy), the sums
/// along `dim`. `grad` and `out` may have any layout; `grad_input` is contiguous.
void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input);

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
