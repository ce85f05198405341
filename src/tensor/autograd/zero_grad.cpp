#include "tensor/autograd/zero_grad.h"

namespace lockstep {

void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none) {
  for (const Tensor& t : tensors) {
    const Tensor grad = t.grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      t.set_grad(Tensor());
    } else {
      grad.zero_();
    }
  }
}

}  // namespace lockstep
