/// \file
/// Classification losses, as torch.nn.functional.cross_entropy and nll_loss with their default
/// mean reduction: scores for C classes on each of N rows, and one class index per row.
///
/// Not supported (yet): class weights, ignore_index (so a target of -100 is an out-of-range
/// error here), label smoothing, the "sum" and "none" reductions, and inputs of more than 2-D.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// Mean over rows i of -log(softmax(logits[i])[target[i]]), as a 0-d tensor of logits' dtype.
/// logits: (N, C), f32 or f64 (raw scores, not probabilities); target: (N), i64 class indices
/// in [0, C). Computed as one fused log_softmax + pick, so large logits are safe.
/// Differentiable with respect to logits: the gradient is (softmax(logits) - onehot(target)) / N.
Tensor cross_entropy(const Tensor& logits, const Tensor& target);

/// Mean over rows i of -log_probs[i, target[i]], as a 0-d tensor. log_probs: (N, C), f32 or
/// f64, usually the output of log_softmax(x, 1); target: (N), i64 in [0, C).
/// cross_entropy(x, t) equals nll_loss(log_softmax(x, 1), t). Differentiable w.r.t. log_probs.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target);

}  // namespace lockstep
