/// \file
/// Learning-rate schedulers (torch.optim.lr_scheduler): an LRScheduler changes its optimiser's
/// learning rate once per step() by a rule of the step count, such as LinearLR, the gradual
/// warm-up of Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour" (2017).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "optim/optimizer.h"

namespace lockstep {

/// A scheduler's state_dict, PyTorch's `{'last_epoch': 3, 'base_lrs': [0.4], 'start_factor':
/// 0.125, ...}` in C++ form:
///
///     scheduler        "LinearLR"              (PyTorch keeps it implicit; Lockstep checks it)
///     last_epoch       3                       steps taken since construction
///     base_lr          0.4                     the optimiser's lr when the scheduler was built
///                                              (PyTorch's base_lrs, one per group: Lockstep's
///                                              optimisers have one group)
///     hyper_parameters {"start_factor": 0.125, "end_factor": 1.0, "total_iters": 10}
///
/// PyTorch's bookkeeping (_step_count, _last_lr, verbose) is left out: the learning rate follows
/// from last_epoch and the rest (see LRScheduler::get_last_lr()).
struct LRSchedulerStateDict {
  std::string scheduler;                           ///< The class: "LinearLR".
  int64_t last_epoch = 0;                          ///< Steps taken since construction.
  double base_lr = 0.0;                            ///< The learning rate the rule scales.
  std::map<std::string, double> hyper_parameters;  ///< The class's own settings, by PyTorch's names.
};

/// The base of every scheduler (torch.optim.lr_scheduler.LRScheduler, `_LRScheduler` in PyTorch
/// 1.13). It remembers the optimiser's learning rate at construction (base_lr), counts steps in
/// last_epoch, and after each step() sets the optimiser's learning rate to the subclass's rule
/// at that count:
///
///     SGD optimizer(model.parameters(), SGDOptions(0.4).momentum(0.9));
///     LinearLR warmup(optimizer, 1.0 / 8, 1.0, 500);   // lr is now 0.05
///     for (...) {
///       ...
///       optimizer.step();
///       warmup.step();                                  // then 0.05 + 0.35 * t / 500
///     }
///
/// last_epoch keeps PyTorch's name, although it counts whatever step() is called for: epochs for
/// a schedule per epoch, optimiser steps for a warm-up per iteration (Goyal et al.'s).
///
/// The rule is PyTorch's closed form, a function of last_epoch, where PyTorch's step() computes
/// each learning rate from the optimiser's previous one (the "chainable" form, so that several
/// schedulers can act on one optimiser). The two agree to the last bits or so (over 10 steps of
/// LinearLR from 0.05 to 0.4, PyTorch ends at 0.39999999999999986, the closed form at 0.4);
/// the closed form cannot drift, and it makes a resumed scheduler depend on its step count
/// alone. It also means one scheduler per optimiser: a learning rate set from outside is
/// replaced at the next step().
///
/// The scheduler refers to the optimiser, which must outlive it.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Counts one step (++last_epoch) and sets the optimiser's learning rate to the rule's value
  /// there. Call it after optimizer.step(), as PyTorch asks: the step just taken used the
  /// previous rate.
  void step();

  /// The learning rate the last step() (or the construction) set (PyTorch returns a list, one
  /// per parameter group; Lockstep's optimisers have one).
  double get_last_lr() const { return last_lr_; }
  /// Steps taken since construction (PyTorch's name: see the class comment).
  int64_t last_epoch() const { return last_epoch_; }
  /// The optimiser's learning rate when the scheduler was built, which the rule scales.
  double base_lr() const { return base_lr_; }

  /// The scheduler's state (torch's scheduler.state_dict()): its class, step count, base_lr and
  /// settings. The optimiser's learning rate is the optimiser's state: save both, as PyTorch's
  /// recipe does (io/checkpoint.h does).
  LRSchedulerStateDict state_dict() const;
  /// Restores what state_dict() returned, as torch's scheduler.load_state_dict: the step count,
  /// base_lr and settings are replaced by the saved ones, and get_last_lr() is the rule's value
  /// at the saved count. The optimiser's learning rate is not touched (load it with
  /// Optimizer::load_state_dict, as in PyTorch). Everything is checked before anything changes:
  /// a state dict of another scheduler class, a negative step count or base_lr, a missing or
  /// invalid setting is an error that says which.
  void load_state_dict(const LRSchedulerStateDict& state);

 protected:
  /// Remembers `optimizer` and its current learning rate as base_lr; `name` ("LinearLR")
  /// starts every error message. The subclass checks its settings, then calls initial_step().
  LRScheduler(std::string name, Optimizer& optimizer);

  /// PyTorch's initial step, which every constructor ends with: last_epoch 0 and the
  /// optimiser's learning rate set to the rule's value there (a warm-up's first rate). A
  /// separate call because a base-class constructor cannot reach the subclass's rule.
  void initial_step();

  /// The class's name, as error messages and state_dict() use it.
  const std::string& name() const { return name_; }

  /// The rule: the learning rate at step count `last_epoch` (PyTorch's _get_closed_form_lr).
  virtual double closed_form_lr(int64_t last_epoch) const = 0;
  /// The class's settings under PyTorch's names, for state_dict().
  virtual std::map<std::string, double> hyper_parameters() const = 0;
  /// Checks `settings` (every name hyper_parameters() returns must be there, with a value the
  /// constructor accepts; `where` starts the messages) and, when `apply`, sets them. Called
  /// twice by load_state_dict: check, then apply.
  virtual void set_hyper_parameters(const std::map<std::string, double>& settings, const std::string& where,
                                    bool apply) = 0;

 private:
  std::string name_;
  Optimizer& optimizer_;
  double base_lr_;
  int64_t last_epoch_ = -1;  // PyTorch's value before the initial step
  double last_lr_ = 0.0;
};

/// torch.optim.lr_scheduler.LinearLR: the learning rate moves in a straight line from
/// start_factor x base_lr to end_factor x base_lr over `total_iters` steps, then stays there:
///
///     lr(t) = base_lr * (start_factor + (end_factor - start_factor) * min(t, total_iters) / total_iters)
///
/// (PyTorch's closed form, operation for operation, so its values are PyTorch's bit for bit;
/// tests/reference/linear_lr_torch.py prints them). With end_factor 1 it is the gradual warm-up of
/// Goyal et al.: build the optimiser with the large-batch rate k x lr, start at 1/k of it, and
/// step once per iteration.
///
/// \see @ref chapter6_effective_batch "Chapter 6, section 7", which warms up a large effective batch
/// with it.
class LinearLR : public LRScheduler {
 public:
  /// Schedules `optimizer`'s learning rate, which becomes base_lr, and sets it to
  /// start_factor x base_lr. Defaults are PyTorch's. Checks: start_factor in (0, 1] (PyTorch
  /// 1.13 accepts 0, but its chainable form then divides by zero at the first step; later
  /// versions refuse it too), end_factor in [0, 1], total_iters >= 1.
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);

  /// The factor of the first learning rate.
  double start_factor() const { return start_factor_; }
  /// The factor from step total_iters on.
  double end_factor() const { return end_factor_; }
  /// The steps the line takes.
  int64_t total_iters() const { return total_iters_; }

 protected:
  /// The line, then end_factor x base_lr (see the class comment).
  double closed_form_lr(int64_t last_epoch) const override;
  /// start_factor, end_factor, total_iters.
  std::map<std::string, double> hyper_parameters() const override;
  /// Checks and (with `apply`) sets those three, with the constructor's rules.
  void set_hyper_parameters(const std::map<std::string, double>& settings, const std::string& where,
                            bool apply) override;

 private:
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

}  // namespace lockstep
