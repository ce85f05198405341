/// \file
/// SavedTensor: a tensor that an op keeps for its backward pass, together with the version its
/// data had at that moment (PyTorch's SavedVariable).
///
/// Backward reads what the forward pass saved: `w * x` keeps x for w's gradient, `exp` its
/// output. If one of them is changed in place in between, the gradient comes out wrong without a
/// sign. Every in-place change counts in the data's version (Tensor::version()), so unpack() can
/// see that the value is no longer the one that was saved, and refuse:
///
///     Tensor y = sum(w * x);    // MulBackward saves x, at version 0
///     x.mul_(2.0);              // x is now at version 1
///     y.backward();             // MulBackward: a tensor it saved in the forward pass ...
#pragma once

#include <cstdint>

#include "core/error.h"
#include "tensor/tensor.h"

namespace lockstep {

/// What SavedTensor::unpack throws when a saved tensor was changed in place after it was saved.
/// The node that tried to use it catches it and names itself in the message (FunctionNode).
class SavedTensorModified : public Error {
 public:
  /// Wraps the message.
  using Error::Error;
};

/// A tensor saved by an op for its backward pass, checked when the backward pass uses it.
///
/// \see @ref chapter1 "Chapter 1: Tensors, autograd and devices", which introduces it.
class SavedTensor {
 public:
  /// Nothing saved: unpack() returns an undefined tensor (an optional weight that was absent).
  SavedTensor() = default;
  /// Saves `tensor` detached (the graph must not hold a cycle through its own output) and the
  /// version of its data now. An undefined tensor saves nothing.
  explicit SavedTensor(const Tensor& tensor);
  /// The saved tensor, if nothing changed its data in place since it was saved; otherwise throws
  /// SavedTensorModified, which says what changed and what to do instead.
  Tensor unpack() const;

 private:
  Tensor tensor_;
  int64_t saved_version_ = 0;
};

}  // namespace lockstep
