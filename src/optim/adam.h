/// \file
/// Adam and AdamW: adaptive moment estimation, following torch.optim.Adam and torch.optim.AdamW
/// exactly (bias corrections included; no amsgrad). AdamW is Adam with decoupled weight decay.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace lockstep {

/// Adam's and AdamW's hyper-parameters, set by chaining:
/// `AdamOptions(3e-4).betas(0.9, 0.95).weight_decay(0.1)`. Defaults are PyTorch's.
class AdamOptions {
 public:
  /// Starts from learning rate `lr` (default 1e-3) and every other hyper-parameter at its default.
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  /// Sets the learning rate.
  AdamOptions& lr(double value) { lr_ = value; return *this; }
  /// Sets the decay rates of the first and second moment estimates (default 0.9, 0.999).
  AdamOptions& betas(double beta1, double beta2) { betas_ = {beta1, beta2}; return *this; }
  /// Sets the term added to the denominator for numerical stability (default 1e-8).
  AdamOptions& eps(double value) { eps_ = value; return *this; }
  /// Sets the weight decay: an L2 penalty added to the gradient for Adam, a decay of the weight
  /// itself for AdamW. Unset, it is each class's PyTorch default: 0 for Adam, 1e-2 for AdamW.
  AdamOptions& weight_decay(double value) { weight_decay_ = value; return *this; }

  /// The learning rate.
  double lr() const { return lr_; }
  /// (beta1, beta2).
  std::pair<double, double> betas() const { return betas_; }
  /// The stability term.
  double eps() const { return eps_; }
  /// The weight decay, or nothing when left at the optimiser's default.
  std::optional<double> weight_decay() const { return weight_decay_; }

 private:
  double lr_;
  std::pair<double, double> betas_{0.9, 0.999};
  double eps_ = 1e-8;
  std::optional<double> weight_decay_;
};

/// torch.optim.Adam. Per parameter p with gradient g, step t (counted per parameter from 1):
///
///     g = g + weight_decay * p                     (Adam: L2 penalty in the gradient)
///     p = p * (1 - lr * weight_decay)              (AdamW instead: decoupled weight decay)
///     m = beta1 * m + (1 - beta1) * g
///     v = beta2 * v + (1 - beta2) * g * g
///     denom = sqrt(v) / sqrt(1 - beta2^t) + eps
///     p -= lr / (1 - beta1^t) * m / denom
///
/// State: "exp_avg" (m), "exp_avg_sq" (v), "step" (t, a 0-d f32 tensor as in PyTorch).
///
/// \see @ref chapter2 "Chapter 2: Training on one device", which introduces it.
class Adam : public Optimizer {
 public:
  /// Optimises `params` (leaves that require grad) with `options`; checks the hyper-parameters
  /// as PyTorch does.
  explicit Adam(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());

 protected:
  /// The constructor AdamW shares: `name` for messages, and where the weight decay acts
  /// (`decoupled_weight_decay`: on the weight, as AdamW; otherwise in the gradient, as Adam).
  Adam(std::string name, std::vector<Tensor> params, const AdamOptions& options, bool decoupled_weight_decay);

  /// Adam's rule for one parameter (see the class comment); keeps "step", "exp_avg" and
  /// "exp_avg_sq".
  void update(size_t param_index, const Tensor& param, const Tensor& grad) override;
  /// betas, eps, weight_decay (and PyTorch's amsgrad and maximize, always false).
  std::map<std::string, HyperParameter> hyper_parameters() const override;
  /// Checks and (with `apply`) sets those hyper-parameters, with the constructor's rules.
  void set_hyper_parameters(const std::map<std::string, HyperParameter>& group, const std::string& where,
                            bool apply) override;
  /// {"step", "exp_avg", "exp_avg_sq"}, PyTorch's order.
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
  /// {} (a 0-d tensor) for "step", the parameter's shape for the moments.
  Shape state_shape(const std::string& name, const Tensor& param) const override;

 private:
  double beta1_;
  double beta2_;
  double eps_;
  double weight_decay_;
  bool decoupled_weight_decay_;
};

/// torch.optim.AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"): the weight
/// shrinks by lr * weight_decay each step instead of weight_decay joining the gradient, so the
/// decay is not rescaled by Adam's per-element step sizes. Default weight_decay 1e-2.
///
/// AdamW is Adam with one line changed, so it is Adam constructed with a flag rather than a
/// second copy of the update (recent PyTorch versions define it the same way).
///
/// \see @ref chapter2 "Chapter 2: Training on one device", which introduces it.
class AdamW : public Adam {
 public:
  /// Optimises `params` with `options` (weight_decay defaults to 1e-2).
  explicit AdamW(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());
};

}  // namespace lockstep
