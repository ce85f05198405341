/// \file
/// What a resume overrides: the flags given with `--resume` whose values the checkpoint
/// replaces, each said in one sentence. A checkpoint restores the optimiser's hyper-parameters,
/// the scheduler's settings and the sampler's seed over those the objects were built with, as
/// PyTorch's load_state_dict calls do, so that the run goes on as the saved one would have; a
/// flag that asked for another value would otherwise be ignored without a word.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace lockstep {

/// The flags whose settings a checkpoint restores, each with its value when it was given on the
/// command line and empty when it was not (a flag left at its default asked for nothing, so
/// nothing is said about it).
struct ResumeFlags {
  std::optional<double> lr;                   ///< --lr: the learning rate (with a warm-up, the one it climbs to)
  std::optional<double> momentum;             ///< --momentum: SGD's momentum
  std::optional<uint64_t> seed;               ///< --seed: the sampler's shuffle (and the initial weights)
  std::optional<double> warmup_epochs;        ///< --warmup-epochs: the warm-up's length in epochs
  int64_t warmup_steps = 0;                   ///< The optimiser steps warmup_epochs comes to in this run.
  std::optional<double> warmup_start_factor;  ///< --warmup-start-factor: the warm-up's first rate / --lr
};

/// One sentence for each flag of `flags` whose value differs from the setting the checkpoint
/// restored (`info`, from load_checkpoint), saying that the checkpoint's value is used, why, in
/// PyTorch's terms, and what to do instead, e.g. "--lr 0.2 differs from the checkpoint's 0.1:
/// the checkpoint's is used (the optimiser's state_dict restores its learning rate, as
/// optimizer.load_state_dict does); start a new run to train with another rate". Empty when every
/// flag given agrees with the checkpoint. Compared:
///
///     --lr                   the restored scheduler's base_lr (the rate a warm-up climbs to),
///                            else the restored optimiser's "lr"
///     --momentum             the restored optimiser's "momentum" (SGD's; Adam has none)
///     --seed                 the restored sampler's seed
///     --warmup-epochs        warmup_steps against the restored scheduler's "total_iters"
///     --warmup-start-factor  the restored scheduler's "start_factor"
///
/// A setting the checkpoint did not restore (no warm-up saved, no optimizer given) is not
/// compared: the flag's value is in force, and load_checkpoint's notes say what was not
/// restored. Nothing here throws: the one combination that cannot be honoured, another
/// optimiser class (`--optimizer adam` against an SGD checkpoint), is refused by
/// load_checkpoint itself ("load_state_dict: the checkpoint's optimizer is SGD, this one is
/// Adam; ...") before this is called.
std::vector<std::string> resume_report(const ResumeInfo& info, const ResumeFlags& flags);

}  // namespace lockstep
