/// \file
/// SGD: stochastic gradient descent with momentum, dampening, weight decay and Nesterov
/// momentum, following torch.optim.SGD's update rule exactly.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lockstep {

/// SGD's hyper-parameters, set by chaining: `SGDOptions(0.05).momentum(0.9).weight_decay(5e-4)`.
/// Defaults are PyTorch's; the learning rate has none (torch.optim.SGD requires it).
class SGDOptions {
 public:
  /// Starts from learning rate `lr` and every other hyper-parameter at its default.
  explicit SGDOptions(double lr) : lr_(lr) {}
  /// Sets the learning rate.
  SGDOptions& lr(double value) { lr_ = value; return *this; }
  /// Sets the momentum factor (default 0: plain SGD).
  SGDOptions& momentum(double value) { momentum_ = value; return *this; }
  /// Sets the dampening of the gradient added to the momentum buffer (default 0).
  SGDOptions& dampening(double value) { dampening_ = value; return *this; }
  /// Sets the L2 penalty added to the gradient: grad + weight_decay * param (default 0).
  SGDOptions& weight_decay(double value) { weight_decay_ = value; return *this; }
  /// Enables Nesterov momentum (default false; needs momentum > 0 and zero dampening).
  SGDOptions& nesterov(bool value) { nesterov_ = value; return *this; }

  /// The learning rate.
  double lr() const { return lr_; }
  /// The momentum factor.
  double momentum() const { return momentum_; }
  /// The dampening.
  double dampening() const { return dampening_; }
  /// The L2 penalty.
  double weight_decay() const { return weight_decay_; }
  /// Whether Nesterov momentum is used.
  bool nesterov() const { return nesterov_; }

 private:
  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
};

/// torch.optim.SGD. Per parameter p with gradient g, each step():
///
///     d = g + weight_decay * p
///     if momentum != 0:
///         buf = d                                        (first step: the buffer starts as d)
///         buf = momentum * buf + (1 - dampening) * d     (later steps)
///         d = nesterov ? d + momentum * buf : buf
///     p -= lr * d
///
/// The momentum buffer is the state "momentum_buffer".
///
/// \see @ref chapter2 "Chapter 2: Training on one device", which introduces it.
class SGD : public Optimizer {
 public:
  /// Optimises `params` (leaves that require grad) with `options`; checks the hyper-parameters
  /// as PyTorch does.
  SGD(std::vector<Tensor> params, const SGDOptions& options);

 protected:
  /// SGD's rule for one parameter (see the class comment); keeps "momentum_buffer".
  void update(size_t param_index, const Tensor& param, const Tensor& grad) override;
  /// momentum, dampening, weight_decay, nesterov (and PyTorch's maximize, always false).
  std::map<std::string, HyperParameter> hyper_parameters() const override;
  /// Checks and (with `apply`) sets those hyper-parameters, with the constructor's rules.
  void set_hyper_parameters(const std::map<std::string, HyperParameter>& group, const std::string& where,
                            bool apply) override;
  /// {"momentum_buffer"}.
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 private:
  double momentum_;
  double dampening_;
  double weight_decay_;
  bool nesterov_;
};

}  // namespace lockstep
