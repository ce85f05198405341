#include "tensor/autograd/saved_tensor.h"

namespace lockstep {

SavedTensor::SavedTensor(const Tensor& tensor)
    : tensor_(tensor.defined() ? tensor.detach() : Tensor()),
      saved_version_(tensor.defined() ? tensor.version() : 0) {}

Tensor SavedTensor::unpack() const {
  if (!tensor_.defined()) return tensor_;
  const int64_t now = tensor_.version();
  if (now != saved_version_) {
    throw SavedTensorModified(detail::concat(
        "a tensor it saved in the forward pass (", dtype_name(tensor_.dtype()), ", shape ", shape_str(tensor_.shape()),
        ") was modified in place after it was saved: it is at version ", now, ", expected version ", saved_version_,
        ", so the gradient would be computed from the wrong values. Make the in-place change after backward(), or "
        "change a clone() instead"));
  }
  return tensor_;
}

}  // namespace lockstep
