/// \file
/// CPU kernels for softmax and log_softmax along one dimension (forward and backward); the
/// losses built on them are in loss_kernels.h.
///
/// Softmax works on *lines*: the n elements along `dim` that share all other indices. A
/// contiguous tensor of shape [2, 5, 3] with dim 1 holds 2 * 3 lines of 5 elements, each 3
/// apart in memory; with dim the last, the lines are the contiguous rows. A 0-d tensor (dim 0)
/// is one line of one element.
#pragma once

#include "tensor/tensor.h"

namespace lockstep::cpu {

/// out = softmax(x) (or log_softmax(x) if `log`) along `dim`. `x` is floating, any layout;
/// `out` is contiguous with x's shape and dtype. f16 and bf16 lines are computed in float and
/// each output is rounded once (the sums in double).
void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out);

/// The gradient of softmax_kernel, from the saved output y and the output gradient dy:
/// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy), the sums
/// along `dim`. `grad` and `out` may have any layout; `grad_input` is contiguous. All three have
/// one dtype; f16 and bf16 are computed in float, as the forward pass.
void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input);

}  // namespace lockstep::cpu
