/// \file
/// softmax and log_softmax along one dimension (torch.softmax / torch.log_softmax), computed
/// stably: the largest element of each line is subtracted before exponentiating, so logits in
/// the thousands neither overflow nor turn into NaN.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// e^x / sum(e^x) along `dim` (negative counts from the end): every line along `dim` becomes
/// positive and sums to 1. Same shape and dtype (f32 or f64) as `a`; differentiable. A NaN in
/// a line makes that whole line NaN, as in PyTorch.
Tensor softmax(const Tensor& a, int64_t dim);

/// log(softmax(a, dim)), computed directly as x - max - log(sum(e^(x - max))), which stays
/// accurate where softmax itself would round to 0. Differentiable.
Tensor log_softmax(const Tensor& a, int64_t dim);

}  // namespace lockstep
