/// \file
/// CrossEntropyLoss (torch.nn.CrossEntropyLoss): the classification loss of every chapter.
///
/// It is a small class of its own rather than a Module: Module::forward takes one input, a
/// loss takes two (scores and labels), and a loss has no parameters or buffers to register.
/// It is still called like PyTorch's, `loss = criterion(logits, target)`.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// Mean cross-entropy between scores and class labels, like torch.nn.CrossEntropyLoss() with
/// its defaults (mean reduction, no class weights, no label smoothing). See tensor/ops/loss.h.
class CrossEntropyLoss {
 public:
  /// logits: (N, C) raw scores; target: (N) i64 class indices in [0, C). Returns the mean over
  /// the N rows of -log softmax(logits)[target], a 0-d tensor to call backward() on.
  Tensor operator()(const Tensor& logits, const Tensor& target) const;
};

}  // namespace lockstep
