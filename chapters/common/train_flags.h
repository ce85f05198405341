/// \file
/// The flags of a training run that chapters 2 to 6 share: how long it trains, how large a
/// step's batch is, how fast it learns, from which seed, and where its data is.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace lockstep {

/// The values of the training flags every chapter from 2 to 6 takes. A chapter whose defaults
/// differ sets them before add_train_flags(), which shows the values it finds as the defaults
/// in `--help`.
struct TrainFlags {
  int epochs = 2;           ///< --epochs: passes over the training set
  int64_t max_steps = 0;    ///< --max-steps: optimiser steps in all before stopping; 0: no limit
  int64_t batch_size = 64;  ///< --batch-size: what one step's batch is depends on the chapter
  double lr = 0.05;         ///< --lr: the learning rate
  double momentum = 0.9;    ///< --momentum: SGD's momentum
  uint64_t seed = 0;        ///< --seed: initialisation and shuffling
  std::string data;         ///< --data: the dataset's folder; empty: the usual places
};

/// What `--seed` seeds in a chapter: one process's model and sampler, or, in a job of ranks,
/// every rank's sampler alike (so that their shards are disjoint) and rank r's model with
/// seed + r (so that only DDP's broadcast makes the replicas equal).
enum class SeedUse { one_process, ranks };

/// Adds the TrainFlags' seven flags to `app`, each with its check (a number above zero, of zero
/// or more, or from 0 to 1). `batch_size_help` says what one `--batch-size` counts in this
/// chapter, e.g. "samples per step on each rank"; `seed_use` what `--seed` seeds.
void add_train_flags(CLI::App& app, TrainFlags& flags, const std::string& batch_size_help, SeedUse seed_use);

}  // namespace lockstep
