#include "optim/adam.h"

#include <cmath>
#include <utility>

#include "core/dispatch.h"
#include "core/error.h"
#include "optim/adam_rule.h"
#include "optim/fused_updates.h"

namespace lockstep {

namespace {
// The constructor's rules for Adam's hyper-parameters; `where` starts the messages.
void check_adam(const std::string& where, double beta1, double beta2, double eps, double weight_decay) {
  LOCKSTEP_CHECK(eps >= 0.0, where, ": expected an eps >= 0, got ", eps);
  LOCKSTEP_CHECK(beta1 >= 0.0 && beta1 < 1.0, where, ": expected betas in [0, 1), got beta1 = ", beta1);
  LOCKSTEP_CHECK(beta2 >= 0.0 && beta2 < 1.0, where, ": expected betas in [0, 1), got beta2 = ", beta2);
  LOCKSTEP_CHECK(weight_decay >= 0.0, where, ": expected a weight_decay >= 0, got ", weight_decay);
}

// PyTorch's defaults differ only in the weight decay.
double default_weight_decay(bool decoupled) { return decoupled ? 1e-2 : 0.0; }
}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", std::move(params), options, /*decoupled_weight_decay=*/false) {}

Adam::Adam(std::string name, std::vector<Tensor> params, const AdamOptions& options, bool decoupled_weight_decay)
    : Optimizer(std::move(name), std::move(params), options.lr()),
      beta1_(options.betas().first),
      beta2_(options.betas().second),
      eps_(options.eps()),
      weight_decay_(options.weight_decay().value_or(default_weight_decay(decoupled_weight_decay))),
      decoupled_weight_decay_(decoupled_weight_decay) {
  check_adam(this->name(), beta1_, beta2_, eps_, weight_decay_);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("AdamW", std::move(params), options, /*decoupled_weight_decay=*/true) {}

std::map<std::string, HyperParameter> Adam::hyper_parameters() const {
  return {{"betas", std::vector<double>{beta1_, beta2_}},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"amsgrad", false},
          {"maximize", false}};
}

void Adam::set_hyper_parameters(const std::map<std::string, HyperParameter>& group, const std::string& where,
                                bool apply) {
  const auto betas = group.find("betas");
  LOCKSTEP_CHECK(betas != group.end() && std::holds_alternative<std::vector<double>>(betas->second) &&
                     std::get<std::vector<double>>(betas->second).size() == 2,
                 where, ": the param group has no \"betas\" pair of numbers");
  const std::vector<double>& b = std::get<std::vector<double>>(betas->second);
  const double eps = number_in(group, "eps", where);
  const double weight_decay = number_in(group, "weight_decay", where);
  for (const char* unsupported : {"amsgrad", "maximize"})
    LOCKSTEP_CHECK(group.count(unsupported) == 0 || !flag_in(group, unsupported, where), where,
                   ": the state dict asks for ", unsupported, "=True, which Lockstep's ", name(),
                   " does not implement");
  check_adam(where, b[0], b[1], eps, weight_decay);
  if (!apply) return;
  beta1_ = b[0];
  beta2_ = b[1];
  eps_ = eps;
  weight_decay_ = weight_decay;
}

Shape Adam::state_shape(const std::string& name, const Tensor& param) const {
  return name == "step" ? Shape{} : param.shape();
}

void Adam::update(size_t param_index, const Tensor& param, const Tensor& grad) {
  // State starts at zero on the parameter's first update.
  Tensor& step_count = state_entry(param_index, "step");
  if (!step_count.defined()) {
    // A 0-d f32 tensor, as PyTorch's torch.tensor(0.), kept on the CPU even for a GPU
    // parameter (as PyTorch does): the bias corrections below need t on the host.
    step_count = zeros({});
    state_entry(param_index, "exp_avg") = zeros_like(param);
    state_entry(param_index, "exp_avg_sq") = zeros_like(param);
  }
  const double t = ++*step_count.data_ptr<float>();

  AdamStep s{lr(), beta1_, beta2_, eps_, weight_decay_, decoupled_weight_decay_, 0.0, 0.0};
  s.step_size = s.lr / (1.0 - std::pow(beta1_, t));
  s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2_, t));
  const Tensor& exp_avg = state_entry(param_index, "exp_avg");
  const Tensor& exp_avg_sq = state_entry(param_index, "exp_avg_sq");
  dispatch_floating(param.dtype(), name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamConstants<T> c = adam_constants<T>(s);
    // The same rule on either device: a loop here, one fused kernel on a GPU.
    kernels::adam_update<T>.call(param.device(), param.numel(), param.data_ptr<T>(), grad.data_ptr<T>(),
                                 exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(), c);
  });
  // Written through their pointers, so counted here (step() counts the parameter's write).
  for (const Tensor& written : {step_count, exp_avg, exp_avg_sq}) increment_version(written);
}

}  // namespace lockstep
