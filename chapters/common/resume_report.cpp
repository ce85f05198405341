#include "common/resume_report.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <variant>

namespace lockstep {
namespace {

// `value` with the fewest digits, 6 or more, that read back as the same double (0.1, not
// 0.10000000000000001), so that two values that differ never print alike.
std::string number_text(double value) {
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {  // from printf's default, so 100 is not 1e+02
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

// The number `key` of a restored param group or scheduler's settings, when it has one.
std::optional<double> number_in(const std::map<std::string, HyperParameter>& group, const std::string& key) {
  const auto found = group.find(key);
  if (found == group.end() || !std::holds_alternative<double>(found->second)) return std::nullopt;
  return std::get<double>(found->second);
}
std::optional<double> number_in(const std::map<std::string, double>& settings, const std::string& key) {
  const auto found = settings.find(key);
  if (found == settings.end()) return std::nullopt;
  return found->second;
}

// "<flag> <given> differs from the checkpoint's <saved>: the checkpoint's is used (<why>);
// start a new run to <instead>".
std::string overridden(const std::string& flag, const std::string& given, const std::string& saved,
                       const std::string& why, const std::string& instead) {
  return flag + " " + given + " differs from the checkpoint's " + saved + ": the checkpoint's is used (" + why +
         "); start a new run to " + instead;
}

}  // namespace

std::vector<std::string> resume_report(const ResumeInfo& info, const ResumeFlags& flags) {
  std::vector<std::string> sentences;
  const std::optional<LRSchedulerStateDict>& scheduler = info.restored_scheduler;
  const std::optional<OptimizerSettings>& optimizer = info.restored_optimizer;

  // With a warm-up, --lr is the rate it climbs to (the scheduler's base_lr): the optimiser's
  // own rate is wherever the warm-up had got to. Without one, it is the optimiser's rate.
  if (flags.lr && scheduler) {
    if (*flags.lr != scheduler->base_lr)
      sentences.push_back(overridden("--lr", number_text(*flags.lr), number_text(scheduler->base_lr),
                                     "the scheduler's state_dict restores its base_lr, the rate the warm-up climbs "
                                     "to, as scheduler.load_state_dict does, and the optimiser's the rate it had "
                                     "reached",
                                     "train with another rate"));
  } else if (const std::optional<double> lr = optimizer ? number_in(optimizer->param_group, "lr") : std::nullopt;
             flags.lr && lr && *flags.lr != *lr) {
    sentences.push_back(overridden("--lr", number_text(*flags.lr), number_text(*lr),
                                   "the optimiser's state_dict restores its learning rate, as "
                                   "optimizer.load_state_dict does",
                                   "train with another rate"));
  }
  if (const std::optional<double> momentum = optimizer ? number_in(optimizer->param_group, "momentum") : std::nullopt;
      flags.momentum && momentum && *flags.momentum != *momentum) {
    sentences.push_back(overridden("--momentum", number_text(*flags.momentum), number_text(*momentum),
                                   "the optimiser's state_dict restores its momentum, as optimizer.load_state_dict "
                                   "does, and its momentum buffers with it",
                                   "train with another momentum"));
  }
  if (flags.seed && info.sampler_restored && *flags.seed != info.sampler_seed) {
    sentences.push_back(overridden("--seed", std::to_string(*flags.seed), std::to_string(info.sampler_seed),
                                   "the sampler resumes the saved run's shuffle, which its seed fixes, so that the "
                                   "rest of the epoch neither repeats nor skips a sample, and the random generators "
                                   "go on from their saved states, as torch.set_rng_state does",
                                   "train from another seed"));
  }
  if (const std::optional<double> total = scheduler ? number_in(scheduler->hyper_parameters, "total_iters")
                                                    : std::nullopt;
      flags.warmup_epochs && total && static_cast<double>(flags.warmup_steps) != *total) {
    sentences.push_back("--warmup-epochs " + number_text(*flags.warmup_epochs) + " comes to " +
                        std::to_string(flags.warmup_steps) + " optimiser steps in this run, and the checkpoint's " +
                        "warm-up takes " + number_text(*total) + ": the checkpoint's is used (the scheduler's " +
                        "state_dict restores its total_iters, as scheduler.load_state_dict does); start a new run " +
                        "to warm up over another length");
  }
  if (const std::optional<double> start = scheduler ? number_in(scheduler->hyper_parameters, "start_factor")
                                                    : std::nullopt;
      flags.warmup_start_factor && start && *flags.warmup_start_factor != *start) {
    sentences.push_back(overridden("--warmup-start-factor", number_text(*flags.warmup_start_factor),
                                   number_text(*start),
                                   "the scheduler's state_dict restores its start_factor, as "
                                   "scheduler.load_state_dict does",
                                   "warm up from another rate"));
  }
  return sentences;
}

}  // namespace lockstep
