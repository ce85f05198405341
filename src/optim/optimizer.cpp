#include "optim/optimizer.h"

#include <utility>

#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/zero_grad.h"
#include "core/error.h"
#include "util/trace.h"

namespace lockstep {

namespace {
// What every update relies on: it writes straight into the parameter's memory, one flat pass
// over f32 or f64 elements (a loop on the CPU, one kernel on a GPU).
void check_updatable(const std::string& name, const Tensor& param, size_t index) {
  LOCKSTEP_CHECK(param.dtype() == DType::f32 || param.dtype() == DType::f64, name, ": parameter ", index,
                 " is ", dtype_name(param.dtype()), ", expected f32 or f64 (keep master weights in f32)");
  LOCKSTEP_CHECK(param.is_contiguous(), name, ": parameter ", index, " of shape ", shape_str(param.shape()),
                 " is not contiguous; optimise a contiguous tensor (e.g. x.contiguous().detach().requires_grad_())");
}
}  // namespace

Optimizer::Optimizer(std::string name, std::vector<Tensor> params, double lr)
    : name_(std::move(name)), params_(std::move(params)), lr_(0.0), state_(params_.size()) {
  LOCKSTEP_CHECK(!params_.empty(), name_, ": got an empty parameter list (pass model.parameters())");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    LOCKSTEP_CHECK(p.defined(), name_, ": parameter ", i, " is an undefined tensor");
    LOCKSTEP_CHECK(p.is_leaf(), name_, ": parameter ", i,
                   " is not a leaf (it was computed from other tensors); optimise the leaf it came from, "
                   "or x.detach().requires_grad_()");
    LOCKSTEP_CHECK(p.requires_grad(), name_, ": parameter ", i,
                   " does not require grad, so it would never receive a gradient (call requires_grad_() on it)");
    check_updatable(name_, p, i);
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  LOCKSTEP_CHECK(lr >= 0.0, name_, ": expected a learning rate >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step() {
  // Updates are never recorded, as in torch.optim, whose step runs under torch.no_grad().
  NoGradGuard no_grad;
  const RecordFunction span([this] { return name_ + ".step"; }, "optim");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = grad_for_step(i);
    if (!grad.defined()) continue;  // no gradient, no update (PyTorch skips .grad None)
    update(i, params_[i], grad);
    // Written through its pointer, so counted here: a graph that saved the old weights must
    // not backward through the new ones.
    increment_version(params_[i]);
  }
}

void Optimizer::zero_grad(bool set_to_none) { lockstep::zero_grad(params_, set_to_none); }

const Tensor& Optimizer::state(size_t param_index, const std::string& name) const {
  LOCKSTEP_CHECK(param_index < params_.size(), name_, ": state asked for parameter ", param_index, ", but there are only ",
                 params_.size(), " parameters");
  LOCKSTEP_CHECK(has_state(param_index, name), name_, ": parameter ", param_index, " has no state '", name,
                 "' (state is created by the first step() that updates the parameter)");
  return state_[param_index].at(name);
}

bool Optimizer::has_state(size_t param_index, const std::string& name) const {
  if (param_index >= state_.size()) return false;
  const auto found = state_[param_index].find(name);
  return found != state_[param_index].end() && found->second.defined();
}

Tensor Optimizer::grad_for_step(size_t param_index) const {
  const Tensor& p = params_[param_index];
  const Tensor grad = p.grad();
  if (!grad.defined()) return grad;
  check_updatable(name_, p, param_index);
  LOCKSTEP_CHECK(grad.shape() == p.shape(), name_, ": the gradient of parameter ", param_index, " has shape ",
                 shape_str(grad.shape()), " but the parameter has shape ", shape_str(p.shape()));
  LOCKSTEP_CHECK(grad.dtype() == p.dtype() && grad.device() == p.device(), name_, ": the gradient of parameter ",
                 param_index, " is ", dtype_name(grad.dtype()), " on ", grad.device(), " but the parameter is ",
                 dtype_name(p.dtype()), " on ", p.device(), "; they must match");
  return grad.contiguous();
}

}  // namespace lockstep
