/// \file
/// Optimizer: the base of every optimiser (torch.optim.Optimizer). It holds the parameters, the
/// learning rate and each parameter's state (momentum buffers, moment estimates), and clears
/// gradients with zero_grad(). step() is the same walk for every optimiser; a subclass supplies
/// only its update rule for one parameter, one fused loop (update()).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

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

 protected:
  /// Checks and stores the parameters; `name` ("SGD", "Adam", ...) starts every error message.
  Optimizer(std::string name, std::vector<Tensor> params, double lr);

  /// The optimiser's name, as error messages use it.
  const std::string& name() const { return name_; }
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
