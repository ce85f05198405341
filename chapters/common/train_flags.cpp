#include "common/train_flags.h"

#include "common/program.h"

namespace lockstep {

void add_train_flags(CLI::App& app, TrainFlags& flags, const std::string& batch_size_help, SeedUse seed_use) {
  app.add_option("--epochs", flags.epochs, "passes over the training set")->check(positive_number());
  app.add_option("--max-steps", flags.max_steps,
                 "stop after this many optimiser steps in all (0: no limit; for smoke tests)")
      ->check(non_negative_number());
  app.add_option("--batch-size", flags.batch_size, batch_size_help)->check(positive_number());
  app.add_option("--lr", flags.lr, "learning rate")->check(positive_number());
  app.add_option("--momentum", flags.momentum, "SGD momentum")->check(number_between(0.0, 1.0));
  app.add_option("--seed", flags.seed,
                 seed_use == SeedUse::ranks ? "seed for shuffling; rank r initialises its model with seed + r"
                                            : "seed for initialisation and shuffling")
      ->check(non_negative_number());
  app.add_option("--data", flags.data, "directory with the dataset's files (default for Fashion-MNIST: $LOCKSTEP_DATA, "
                                       "data/, /usr/share/datasets/fashion-mnist)");
}

}  // namespace lockstep
