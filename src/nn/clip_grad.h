/// \file
/// Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_): when the gradients of
/// all parameters together, seen as one long vector, are longer than `max_norm`, every gradient
/// is scaled down by the same factor so that the vector has that length. The direction of the
/// step is kept; only its size is capped.
///
///     total = sqrt(sum over every gradient element g of g^2)
///     every grad *= min(1, max_norm / (total + 1e-6))
///
/// The two halves are separate functions, as in PyTorch 2.6 (get_total_norm and
/// clip_grads_with_norm_), because sharded data parallelism needs to put a collective between
/// them: each rank holds a shard of every gradient, sums its shard's squares, and only the sum
/// over ranks (an all-reduce) gives the total (FSDPModule::clip_grad_norm_).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// The sum of the squares of every element of every parameter's gradient, accumulated in f64
/// (a parameter without a gradient adds nothing): the square of the total norm.
double grad_squared_sum(const std::vector<Tensor>& params);

/// Multiplies every gradient by min(1, max_norm / (total_norm + 1e-6)) in place (PyTorch's
/// clip_grads_with_norm_), where `total_norm` is the norm of all of them together. `max_norm`
/// must be positive.
void clip_grads_with_norm_(const std::vector<Tensor>& params, double max_norm, double total_norm);

/// Scales the gradients of `params` so that their total norm is at most `max_norm` and returns
/// the total norm they had before (torch.nn.utils.clip_grad_norm_, with the 2-norm).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace lockstep
