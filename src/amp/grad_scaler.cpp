// GradScaler's bookkeeping: stages, flags and the scale. The arithmetic on the gradients is one
// kernel, run through the dispatch point (tensor/ops/dispatch/amp_kernels.h) on their device.
#include "amp/grad_scaler.h"

#include <cmath>
#include <cstddef>
#include <string>

#include "core/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/dispatch/amp_kernels.h"

namespace lockstep {

namespace {

// The keys of state_dict(), PyTorch's.
const char* const kStateKeys[] = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"};

// A one-element (0-dim) CPU tensor holding `value`, for state_dict().
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, TensorOptions().dtype(dtype)); }

// The value under `key` in `state`; a missing key is an error naming it.
double value_of(const StateDict& state, const char* key) {
  for (const auto& [name, tensor] : state) {
    if (name == key) return tensor.item();
  }
  std::string expected;
  for (const char* k : kStateKeys) expected += std::string(expected.empty() ? "" : ", ") + k;
  LOCKSTEP_FAIL("GradScaler.load_state_dict: the state dict has no \"", key,
                "\" entry; expected the keys ", expected, " that GradScaler::state_dict() returns");
}

// Refuses settings with which scaling cannot work, naming `caller` and the scale's name there.
void check_settings(const char* caller, const char* scale_name, double scale, double growth_factor,
                    double backoff_factor, double growth_interval) {
  LOCKSTEP_CHECK(std::isfinite(scale) && scale > 0.0, caller, ": expected a finite ", scale_name, " > 0, got ", scale);
  LOCKSTEP_CHECK(growth_factor > 1.0, caller, ": expected a growth_factor > 1, got ", growth_factor);
  LOCKSTEP_CHECK(backoff_factor > 0.0 && backoff_factor < 1.0, caller, ": expected a backoff_factor in (0, 1), got ",
                 backoff_factor);
  LOCKSTEP_CHECK(growth_interval >= 1, caller, ": expected a growth_interval >= 1, got ", growth_interval);
}

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& options)
    : scale_(static_cast<float>(options.init_scale())),
      growth_factor_(options.growth_factor()),
      backoff_factor_(options.backoff_factor()),
      growth_interval_(options.growth_interval()),
      enabled_(options.enabled()) {
  check_settings("GradScaler", "init_scale", scale_, growth_factor_, backoff_factor_,
                 static_cast<double>(growth_interval_));
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!enabled_) return loss;
  return loss * static_cast<double>(scale_);
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return;
  OptimizerState& state = per_optimizer_states_[&optimizer];
  LOCKSTEP_CHECK(state.stage != Stage::unscaled,
                 "GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update(); "
                 "its gradients are unscaled once per iteration (step() unscales them itself when unscale_() was not "
                 "called)");
  LOCKSTEP_CHECK(state.stage != Stage::stepped,
                 "GradScaler.unscale_: unscale_() is being called after step() on this optimizer; call it before "
                 "step(), or call update() first to start the next iteration");
  check_scale_invertible("GradScaler.unscale_");

  // The gradients by device, as the kernel takes one device's tensors at a time.
  std::vector<std::pair<Device, std::vector<Tensor>>> grads_per_device;
  for (const Tensor& param : optimizer.params()) {
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    // Checked before any gradient is touched, so that a 16-bit gradient leaves all of them as
    // they were. Master weights in f32 are the rule (PyTorch: "Attempting to unscale FP16
    // gradients.").
    LOCKSTEP_CHECK(grad.dtype() == DType::f32 || grad.dtype() == DType::f64,
                   "GradScaler.unscale_: cannot unscale ", dtype_name(grad.dtype()),
                   " gradients; keep the parameters in f32 (master weights), so that their gradients are f32");
    auto group = grads_per_device.begin();
    while (group != grads_per_device.end() && group->first != grad.device()) ++group;
    if (group == grads_per_device.end()) group = grads_per_device.insert(group, {grad.device(), {}});
    group->second.push_back(grad);
  }

  // The inverse as PyTorch computes it (in double, then rounded to float): exact for the
  // powers of two that the default factors keep the scale at.
  const double inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  state.found_inf_per_device.clear();
  for (const auto& [device, grads] : grads_per_device) {
    const Tensor found = zeros({1}, TensorOptions().device(device));
    kernels::non_finite_check_and_unscale.call(device, grads, found, inv_scale);
    for (const Tensor& grad : grads) increment_version(grad);  // written through its pointer
    state.found_inf_per_device.emplace_back(device, found);
  }
  state.stage = Stage::unscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check_scale_invertible("GradScaler.step");
  LOCKSTEP_CHECK(per_optimizer_states_[&optimizer].stage != Stage::stepped,
                 "GradScaler.step: step() has already been called on this optimizer since the last update(); call "
                 "update() once per iteration, after step()");
  if (per_optimizer_states_[&optimizer].stage == Stage::ready) unscale_(optimizer);
  OptimizerState& state = per_optimizer_states_[&optimizer];
  LOCKSTEP_CHECK(!state.found_inf_per_device.empty(),
                 "GradScaler.step: no inf checks were recorded for this optimizer: none of its parameters has a "
                 "gradient (call backward() on scale(loss) before step())");
  const bool stepped = !found_inf(state);
  if (stepped) optimizer.step();
  state.stage = Stage::stepped;
  return stepped;
}

void GradScaler::update() {
  if (!enabled_) return;
  // Every optimiser's flags count, also those of one only unscaled, as in PyTorch.
  size_t checks = 0;
  bool any_inf = false;
  for (const auto& entry : per_optimizer_states_) {
    checks += entry.second.found_inf_per_device.size();
    any_inf = any_inf || found_inf(entry.second);
  }
  LOCKSTEP_CHECK(checks > 0,
                 "GradScaler.update: no inf checks were recorded prior to update(); call step(optimizer) (or "
                 "unscale_(optimizer)) first, after backward() has given the parameters gradients");
  // PyTorch's _amp_update_scale_: the float scale times the double factor, rounded to float.
  if (any_inf) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == growth_interval_) {
    const float grown = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  per_optimizer_states_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  scale_ = static_cast<float>(new_scale);
  per_optimizer_states_.clear();
}

double GradScaler::get_scale() const { return enabled_ ? static_cast<double>(scale_) : 1.0; }

StateDict GradScaler::state_dict() const {
  if (!enabled_) return {};
  return {{"scale", scalar_tensor(scale_, DType::f32)},
          {"growth_factor", scalar_tensor(growth_factor_, DType::f64)},
          {"backoff_factor", scalar_tensor(backoff_factor_, DType::f64)},
          {"growth_interval", scalar_tensor(static_cast<double>(growth_interval_), DType::i64)},
          {"_growth_tracker", scalar_tensor(static_cast<double>(growth_tracker_), DType::i64)}};
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!enabled_) return;
  LOCKSTEP_CHECK(!state.empty(),
                 "GradScaler.load_state_dict: the state dict is empty, possibly because it was saved from a disabled "
                 "GradScaler");
  // Every key is read and checked before any is applied, so a state that lacks one, or holds
  // settings the constructor would refuse, changes nothing.
  const double scale = value_of(state, "scale");
  const double growth_factor = value_of(state, "growth_factor");
  const double backoff_factor = value_of(state, "backoff_factor");
  const double growth_interval = value_of(state, "growth_interval");
  const double growth_tracker = value_of(state, "_growth_tracker");
  check_settings("GradScaler.load_state_dict", "scale", scale, growth_factor, backoff_factor, growth_interval);
  scale_ = static_cast<float>(scale);
  growth_factor_ = growth_factor;
  backoff_factor_ = backoff_factor;
  growth_interval_ = static_cast<int64_t>(growth_interval);
  growth_tracker_ = static_cast<int64_t>(growth_tracker);
}

bool GradScaler::found_inf(const OptimizerState& state) {
  for (const auto& entry : state.found_inf_per_device) {
    if (entry.second.item() != 0.0) return true;
  }
  return false;
}

void GradScaler::check_scale_invertible(const char* caller) const {
  LOCKSTEP_CHECK(std::isfinite(scale_) && scale_ > 0.0f, caller, ": the loss scale is ", scale_,
                 "; unscaling the gradients needs a finite scale > 0 (set one with update(new_scale) or "
                 "load_state_dict())");
}

}  // namespace lockstep
