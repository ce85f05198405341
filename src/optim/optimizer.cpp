#include "optim/optimizer.h"

#include <algorithm>
#include <set>
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
  // The state update() creates on the first step is the optimiser's, in the memory ledger.
  const MemoryCategoryGuard category(MemoryCategory::optimizer_state);
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

std::string optimizer_state_key(size_t index, const std::string& name) {
  return "state." + std::to_string(index) + "." + name;
}

Shape Optimizer::state_shape(const std::string& name, const Tensor& param) const {
  (void)name;
  return param.shape();
}

void Optimizer::set_hyper_parameters(const std::map<std::string, HyperParameter>& group, const std::string& where,
                                     bool apply) {
  (void)group;
  (void)where;
  (void)apply;
}

std::vector<std::string> Optimizer::state_names() const {
  std::set<std::string> names;
  for (const auto& per_param : state_)
    for (const auto& entry : per_param) names.insert(entry.first);
  return std::vector<std::string>(names.begin(), names.end());
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict out;
  out.optimizer = name_;
  out.num_params = static_cast<int64_t>(params_.size());
  // PyTorch's order: by parameter, then in the order the optimiser names its state.
  for (size_t i = 0; i < params_.size(); ++i)
    for (const std::string& state_name : state_names())
      if (has_state(i, state_name)) out.state.emplace_back(optimizer_state_key(i, state_name), state_[i].at(state_name));
  out.param_group = hyper_parameters();
  out.param_group["lr"] = lr_;
  return out;
}

namespace {
// Splits "state.<index>.<name>" into its index and name; false if `key` has another form.
bool parse_state_key(const std::string& key, size_t* index, std::string* name) {
  const std::string prefix = "state.";
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot + 1 == key.size()) return false;
  const std::string digits = key.substr(prefix.size(), dot - prefix.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *index = static_cast<size_t>(std::stoull(digits));
  *name = key.substr(dot + 1);
  return true;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

double Optimizer::number_in(const std::map<std::string, HyperParameter>& group, const std::string& key,
                            const std::string& where) {
  const auto found = group.find(key);
  LOCKSTEP_CHECK(found != group.end(), where, ": the param group has no \"", key, "\"");
  LOCKSTEP_CHECK(std::holds_alternative<double>(found->second), where, ": the param group's \"", key,
                 "\" should be a number");
  return std::get<double>(found->second);
}

bool Optimizer::flag_in(const std::map<std::string, HyperParameter>& group, const std::string& key,
                        const std::string& where) {
  const auto found = group.find(key);
  LOCKSTEP_CHECK(found != group.end(), where, ": the param group has no \"", key, "\"");
  LOCKSTEP_CHECK(std::holds_alternative<bool>(found->second), where, ": the param group's \"", key,
                 "\" should be true or false");
  return std::get<bool>(found->second);
}

void Optimizer::load_state_dict(const OptimizerStateDict& state) {
  const std::string where = name_ + ".load_state_dict";
  LOCKSTEP_CHECK(state.optimizer == name_, "load_state_dict: the checkpoint's optimizer is ", state.optimizer,
                 ", this one is ", name_, "; build the optimiser the checkpoint was saved with");
  LOCKSTEP_CHECK(state.num_params == static_cast<int64_t>(params_.size()), where, ": the state dict is for ",
                 state.num_params, " parameters, this optimiser has ", params_.size(),
                 " (was it saved for another model, or for a subset of its parameters?)");
  // The hyper-parameters: "lr" here, the rest by the subclass; check all before setting any.
  const auto lr = state.param_group.find("lr");
  LOCKSTEP_CHECK(lr != state.param_group.end() && std::holds_alternative<double>(lr->second), where,
                 ": the param group has no number \"lr\" (the learning rate)");
  const double new_lr = std::get<double>(lr->second);
  LOCKSTEP_CHECK(new_lr >= 0.0, where, ": expected a learning rate >= 0, got ", new_lr);
  set_hyper_parameters(state.param_group, where, /*apply=*/false);

  // The tensors: known names, valid indices, shapes of their parameters, and for each
  // parameter all of its state or none.
  const std::vector<std::string> names = state_names();
  std::vector<std::map<std::string, Tensor>> incoming(params_.size());
  for (const auto& [key, tensor] : state.state) {
    size_t index = 0;
    std::string state_name;
    LOCKSTEP_CHECK(parse_state_key(key, &index, &state_name), where, ": the state dict has an entry '", key,
                   "'; expected names of the form state.<parameter index>.<state name>");
    LOCKSTEP_CHECK(index < params_.size(), where, ": the state dict has state for parameter ", index,
                   ", but this optimiser has only ", params_.size(), " parameters");
    LOCKSTEP_CHECK(std::find(names.begin(), names.end(), state_name) != names.end(), where, ": '", key,
                   "' is state ", name_, " does not keep (", name_, " keeps ", join(names),
                   "); was it saved by another optimiser?");
    LOCKSTEP_CHECK(tensor.defined(), where, ": '", key, "' is an undefined tensor");
    LOCKSTEP_CHECK(is_floating(tensor.dtype()), where, ": '", key, "' is ", dtype_name(tensor.dtype()),
                   ", expected a floating-point tensor");
    const Shape expected = state_shape(state_name, params_[index]);
    LOCKSTEP_CHECK(tensor.shape() == expected, where, ": '", key, "' has shape ", shape_str(tensor.shape()),
                   " but parameter ", index, " needs ", shape_str(expected),
                   " (the parameters are not those the state was saved for)");
    LOCKSTEP_CHECK(incoming[index].emplace(state_name, tensor).second, where, ": '", key, "' appears twice");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (incoming[i].empty()) continue;
    for (const std::string& n : names)
      LOCKSTEP_CHECK(incoming[i].count(n) == 1, where, ": parameter ", i, " has state ",
                     incoming[i].begin()->first, " but no '", optimizer_state_key(i, n), "'; ", name_,
                     " keeps all of ", join(names), " or none");
  }

  // Apply: copies, so that the loaded optimiser never shares memory with the state dict.
  set_hyper_parameters(state.param_group, where, /*apply=*/true);
  lr_ = new_lr;
  const MemoryCategoryGuard category(MemoryCategory::optimizer_state);
  for (size_t i = 0; i < params_.size(); ++i) {
    state_[i].clear();
    for (const auto& [state_name, tensor] : incoming[i]) {
      const Tensor& p = params_[i];
      // Step counts stay as PyTorch keeps them: 0-d f32 on the CPU; the rest follow the parameter.
      const bool host_scalar = state_name == "step";
      const Tensor copy = host_scalar ? tensor.detach().to(Device::cpu()).to(DType::f32).clone()
                                      : tensor.detach().to(p.device()).to(p.dtype()).contiguous().clone();
      state_[i][state_name] = copy;
    }
  }
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
