/// \file
/// Optimizer: the base of every optimiser (torch.optim.Optimizer). It holds the parameters, the
/// learning rate and each parameter's state (momentum buffers, moment estimates), and clears
/// gradients with zero_grad(). step() is the same walk for every optimiser; a subclass supplies
/// only its update rule for one parameter, one fused loop (update()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// One hyper-parameter of a parameter group, as a JSON value: a flag (nesterov), a number (lr,
/// momentum, eps) or a list of numbers (betas, which PyTorch keeps as a tuple).
using HyperParameter = std::variant<bool, double, std::vector<double>>;

/// An optimiser's state_dict, PyTorch's `{'state': {index: {...}}, 'param_groups': [{...}]}`
/// in C++ form:
///
///     optimizer   "Adam"                       (PyTorch keeps it implicit; Lockstep checks it)
///     state       "state.0.step"        -> 0-d f32 tensor     (the tensors, by parameter index
///                 "state.0.exp_avg"     -> tensor              and PyTorch's state names;
///                 "state.0.exp_avg_sq"  -> tensor              flattened with dots, as a
///                 ...                                          checkpoint stores them)
///     param_group {"lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, ...}
///     num_params  how many parameters the group holds (PyTorch's 'params': [0, 1, ..., n-1])
///
/// One group, because Lockstep's optimisers have one. A parameter that has never been updated
/// has no entries, as in PyTorch (SGD's momentum_buffer appears with the first step).
struct OptimizerStateDict {
  std::string optimizer;                                ///< The class: "SGD", "Adam" or "AdamW".
  /// "state.<index>.<name>" -> tensor, in order (the same type as nn's StateDict, spelled out
  /// because optim may not include nn, a folder of its own layer).
  std::vector<std::pair<std::string, Tensor>> state;
  std::map<std::string, HyperParameter> param_group;    ///< The group's hyper-parameters by name.
  int64_t num_params = 0;                               ///< The number of parameters of the group.
};

/// The key under which OptimizerStateDict::state holds state `name` of parameter `index`:
/// "state.<index>.<name>".
std::string optimizer_state_key(size_t index, const std::string& name);

/// Updates parameters from their gradients, like torch.optim.Optimizer:
///
///     optimizer.zero_grad();
///     loss.backward();
///     optimizer.step();
///
/// Parameters must be leaves that require grad, contiguous f32 or f64 tensors, on the CPU or a GPU
/// (a Module's parameters()). One parameter group: every parameter shares the hyper-parameters.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  /// Updates every parameter that has a gradient with the subclass's rule (update()), under
  /// NoGradGuard as torch.optim's step runs under torch.no_grad(); parameters whose grad() is
  /// undefined are skipped, exactly as PyTorch skips those whose .grad is None. While tracing
  /// it is one span, "<name>.step" (e.g. "SGD.step").
  void step();

  /// Clears every parameter's gradient: `set_to_none` drops it (grad() becomes undefined, the
  /// default since PyTorch 2.0); otherwise it is filled with zeros in place, so that a following
  /// step() still updates the parameter (with a zero gradient, which momentum or weight decay
  /// may turn into a non-zero move).
  void zero_grad(bool set_to_none = true);

  /// The learning rate the next step() uses.
  double lr() const { return lr_; }
  /// Changes the learning rate (for schedules: warm-up, decay); must be >= 0.
  void set_lr(double lr);

  /// The parameters, in the order they were given.
  const std::vector<Tensor>& params() const { return params_; }

  /// The state of parameter `param_index` under PyTorch's name ("momentum_buffer", "exp_avg",
  /// "exp_avg_sq", "step"). State is created by the first step() that updates the parameter;
  /// asking before that, or for a name the optimiser does not keep, is an error.
  const Tensor& state(size_t param_index, const std::string& name) const;
  /// Whether parameter `param_index` has state `name` yet.
  bool has_state(size_t param_index, const std::string& name) const;

  /// The optimiser's state and hyper-parameters (torch's optimizer.state_dict()). The tensors
  /// are the optimiser's own (not copies, as in PyTorch): save them or clone() them before the
  /// next step() if you need a snapshot.
  OptimizerStateDict state_dict() const;
  /// Restores what state_dict() returned, as torch's optimizer.load_state_dict: the
  /// hyper-parameters of the group are replaced by the saved ones (the learning rate too), and
  /// every state tensor is copied, converted to its parameter's dtype and moved to its
  /// parameter's device (Adam's "step" stays a 0-d f32 CPU tensor). Parameters the state dict
  /// has no state for start afresh, as they would before their first step.
  ///
  /// Everything is checked before anything changes, and each mismatch is an error that says
  /// what differs: another optimiser ("load_state_dict: the checkpoint's optimizer is Adam, this
  /// one is SGD"), another number of parameters, a state name this optimiser does not keep, a
  /// tensor whose shape differs from its parameter's, a missing entry (Adam keeps all three of
  /// step, exp_avg and exp_avg_sq or none), a missing or invalid hyper-parameter.
  void load_state_dict(const OptimizerStateDict& state);

 protected:
  /// Checks and stores the parameters; `name` ("SGD", "Adam", ...) starts every error message.
  Optimizer(std::string name, std::vector<Tensor> params, double lr);

  /// The optimiser's name, as error messages and state_dict() use it.
  const std::string& name() const { return name_; }
  // The three hooks below make an optimiser's state_dict complete. Their defaults let an
  // optimiser written outside the library (the exercise's NesterovSGD, say) save and load the
  // learning rate and the state its steps created, with no code of its own; SGD and Adam
  // override all three.
  /// The subclass's hyper-parameters besides "lr", under PyTorch's names, for state_dict().
  /// Default: none.
  virtual std::map<std::string, HyperParameter> hyper_parameters() const { return {}; }
  /// Checks `group` (every name hyper_parameters() returns must be there, of its type, with a
  /// value the constructor accepts; `where` starts the messages) and, when `apply`, sets the
  /// subclass's hyper-parameters from it. Called twice by load_state_dict: check, then apply.
  /// Default: nothing to check or set.
  virtual void set_hyper_parameters(const std::map<std::string, HyperParameter>& group, const std::string& where,
                                    bool apply);
  /// The state names a parameter of this optimiser keeps, all of them present or none: SGD's
  /// "momentum_buffer", Adam's "step", "exp_avg" and "exp_avg_sq". Default: the names the steps
  /// taken so far created, in name order (so a fresh optimiser of that kind loads no state
  /// until it overrides this).
  virtual std::vector<std::string> state_names() const;
  /// The shape state `name` of parameter `param` must have: the parameter's, or {} for a step
  /// count. Defaults to the parameter's.
  virtual Shape state_shape(const std::string& name, const Tensor& param) const;
  /// The number `key` of `group`; a missing key or another type is an error starting with `where`.
  static double number_in(const std::map<std::string, HyperParameter>& group, const std::string& key,
                          const std::string& where);
  /// The flag `key` of `group`; a missing key or another type is an error starting with `where`.
  static bool flag_in(const std::map<std::string, HyperParameter>& group, const std::string& key,
                      const std::string& where);
  /// The update rule: writes the new value of parameter `param_index` (`param`) into its memory
  /// from `grad` (contiguous, of its shape, dtype and device), and its state. Called by step()
  /// under NoGradGuard, only for parameters that have a gradient; step() counts the write in
  /// the parameter's version, the rule counts those of the state tensors it writes.
  virtual void update(size_t param_index, const Tensor& param, const Tensor& grad) = 0;
  /// Mutable state of parameter `param_index`, by name (created empty on first use).
  Tensor& state_entry(size_t param_index, const std::string& name) { return state_[param_index][name]; }

 private:
  // The gradient parameter `param_index` is updated with, contiguous; undefined when the
  // parameter has none (skip it). Checks that the parameter can still be updated in place
  // (it may have been moved since construction) and that the gradient matches it.
  Tensor grad_for_step(size_t param_index) const;

  std::string name_;
  std::vector<Tensor> params_;
  double lr_;
  std::vector<std::map<std::string, Tensor>> state_;  // one map per parameter, like optimizer.state[p]
};

}  // namespace lockstep
