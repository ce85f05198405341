#include "optim/sgd.h"

#include <utility>

#include "core/dispatch.h"
#include "core/error.h"
#include "optim/fused_updates.h"
#include "optim/sgd_rule.h"

namespace lockstep {

namespace {
// The constructor's rules for SGD's hyper-parameters; `where` starts the messages.
void check_sgd(const std::string& where, double momentum, double dampening, double weight_decay, bool nesterov) {
  LOCKSTEP_CHECK(momentum >= 0.0, where, ": expected a momentum >= 0, got ", momentum);
  LOCKSTEP_CHECK(weight_decay >= 0.0, where, ": expected a weight_decay >= 0, got ", weight_decay);
  LOCKSTEP_CHECK(!nesterov || (momentum > 0.0 && dampening == 0.0), where,
                 ": Nesterov momentum requires a momentum > 0 and zero dampening, got momentum ", momentum,
                 " and dampening ", dampening);
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer("SGD", std::move(params), options.lr()),
      momentum_(options.momentum()),
      dampening_(options.dampening()),
      weight_decay_(options.weight_decay()),
      nesterov_(options.nesterov()) {
  check_sgd("SGD", momentum_, dampening_, weight_decay_, nesterov_);
}


std::map<std::string, HyperParameter> SGD::hyper_parameters() const {
  return {{"momentum", momentum_}, {"dampening", dampening_}, {"weight_decay", weight_decay_},
          {"nesterov", nesterov_}, {"maximize", false}};
}

void SGD::set_hyper_parameters(const std::map<std::string, HyperParameter>& group, const std::string& where,
                               bool apply) {
  const double momentum = number_in(group, "momentum", where);
  const double dampening = number_in(group, "dampening", where);
  const double weight_decay = number_in(group, "weight_decay", where);
  const bool nesterov = flag_in(group, "nesterov", where);
  LOCKSTEP_CHECK(group.count("maximize") == 0 || !flag_in(group, "maximize", where), where,
                 ": the state dict asks for maximize=True, which Lockstep's SGD does not implement");
  check_sgd(where, momentum, dampening, weight_decay, nesterov);
  if (!apply) return;
  momentum_ = momentum;
  dampening_ = dampening;
  weight_decay_ = weight_decay;
  nesterov_ = nesterov;
}

void SGD::update(size_t param_index, const Tensor& param, const Tensor& grad) {
  SGDStep s{lr(), momentum_, dampening_, weight_decay_, nesterov_, false};
  Tensor buf;
  if (momentum_ != 0.0) {
    Tensor& entry = state_entry(param_index, "momentum_buffer");
    s.first_step = !entry.defined();
    if (s.first_step) entry = empty_like(param);
    buf = entry;
  }
  dispatch_floating(param.dtype(), "SGD", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const SGDConstants<T> c = sgd_constants<T>(s);
    T* b = buf.defined() ? buf.data_ptr<T>() : nullptr;
    // The same rule on either device: a loop here, one fused kernel on a GPU.
    kernels::sgd_update<T>.call(param.device(), param.numel(), param.data_ptr<T>(), grad.data_ptr<T>(), b, c);
  });
  // Written through its pointer, so counted here (step() counts the parameter's write).
  if (buf.defined()) increment_version(buf);
}

}  // namespace lockstep
