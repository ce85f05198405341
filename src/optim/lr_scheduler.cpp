#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace lockstep {

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer)
    : name_(std::move(name)), optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::initial_step() { step(); }

void LRScheduler::step() {
  ++last_epoch_;
  last_lr_ = closed_form_lr(last_epoch_);
  optimizer_.set_lr(last_lr_);
}

LRSchedulerStateDict LRScheduler::state_dict() const {
  LRSchedulerStateDict out;
  out.scheduler = name_;
  out.last_epoch = last_epoch_;
  out.base_lr = base_lr_;
  out.hyper_parameters = hyper_parameters();
  return out;
}

void LRScheduler::load_state_dict(const LRSchedulerStateDict& state) {
  const std::string where = name_ + ".load_state_dict";
  LOCKSTEP_CHECK(state.scheduler == name_, where, ": the state dict is a ", state.scheduler,
                 "'s, this scheduler is a ", name_, "; build the scheduler the state was saved from");
  LOCKSTEP_CHECK(state.last_epoch >= 0, where, ": last_epoch is ", state.last_epoch,
                 "; expected a step count of 0 or more (the state dict is damaged)");
  LOCKSTEP_CHECK(std::isfinite(state.base_lr) && state.base_lr >= 0.0, where, ": base_lr is ", state.base_lr,
                 "; expected a learning rate >= 0 (the state dict is damaged)");
  const std::map<std::string, double> mine = hyper_parameters();
  for (const auto& entry : state.hyper_parameters)
    LOCKSTEP_CHECK(mine.count(entry.first) == 1, where, ": the state dict has a setting \"", entry.first, "\" that ",
                   name_, " does not have; was it saved from another scheduler?");
  set_hyper_parameters(state.hyper_parameters, where, /*apply=*/false);

  set_hyper_parameters(state.hyper_parameters, where, /*apply=*/true);
  last_epoch_ = state.last_epoch;
  base_lr_ = state.base_lr;
  last_lr_ = closed_form_lr(last_epoch_);
}

namespace {
// LinearLR's three rules, for the constructor and load_state_dict alike; `where` starts the
// message. total_iters arrives as a double from a state dict, so it is checked as one.
void check_linear(const std::string& where, double start_factor, double end_factor, double total_iters) {
  LOCKSTEP_CHECK(start_factor > 0.0 && start_factor <= 1.0, where, ": expected start_factor in (0, 1], got ",
                 start_factor, "; the first learning rate is start_factor x the optimiser's (to warm up to k x a "
                 "rate, build the optimiser with k x the rate and pass start_factor 1/k)");
  LOCKSTEP_CHECK(end_factor >= 0.0 && end_factor <= 1.0, where, ": expected end_factor in [0, 1], got ", end_factor,
                 "; the last learning rate is end_factor x the optimiser's, so build the optimiser with the "
                 "largest rate of the schedule");
  // 2^53: the largest whole number a double holds exactly, far beyond any training run.
  LOCKSTEP_CHECK(total_iters >= 1.0 && total_iters <= 9007199254740992.0 && std::floor(total_iters) == total_iters,
                 where, ": expected total_iters, the steps the line takes, to be a whole number of 1 or more, got ",
                 total_iters);
}

double setting(const std::map<std::string, double>& settings, const std::string& key, const std::string& where) {
  const auto found = settings.find(key);
  LOCKSTEP_CHECK(found != settings.end(), where, ": the state dict has no \"", key, "\"");
  return found->second;
}
}  // namespace

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler("LinearLR", optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  check_linear(name(), start_factor, end_factor, static_cast<double>(total_iters));
  initial_step();
}

double LinearLR::closed_form_lr(int64_t last_epoch) const {
  // PyTorch's expression in PyTorch's order (Python evaluates left to right), so that the
  // doubles round alike: base_lr * (start + ((end - start) * min(total, t)) / total).
  const double t = static_cast<double>(std::min(total_iters_, last_epoch));
  const double total = static_cast<double>(total_iters_);
  return base_lr() * (start_factor_ + (end_factor_ - start_factor_) * t / total);
}

std::map<std::string, double> LinearLR::hyper_parameters() const {
  return {{"start_factor", start_factor_}, {"end_factor", end_factor_},
          {"total_iters", static_cast<double>(total_iters_)}};
}

void LinearLR::set_hyper_parameters(const std::map<std::string, double>& settings, const std::string& where,
                                    bool apply) {
  const double start = setting(settings, "start_factor", where);
  const double end = setting(settings, "end_factor", where);
  const double total = setting(settings, "total_iters", where);
  check_linear(where, start, end, total);
  if (!apply) return;
  start_factor_ = start;
  end_factor_ = end;
  total_iters_ = static_cast<int64_t>(total);
}

}  // namespace lockstep
