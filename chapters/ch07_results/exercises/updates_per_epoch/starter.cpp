// Exercise ch07_updates_per_epoch: your file. Count the optimiser steps of one epoch on N ranks,
// scale the learning rate to the effective batch, and warm it up. Build and test it with:
//   make exercise EX=ch07_updates_per_epoch
#include <stdexcept>
#include <string>

#include "lockstep.h"
#include "updates_per_epoch.h"  // the three declarations (README: a copy kept elsewhere)

namespace exercise {

using namespace lockstep;

int64_t updates_per_epoch(int64_t images, int64_t batch, int64_t ranks) {
  // TODO: the batches rank 0's DataLoader yields in one epoch:
  //   - DistributedSampler (drop_last false) gives every rank ceil(images / ranks) indices,
  //     padding with repeated images when the ranks do not divide the data;
  //   - DataLoader (drop_last false) cuts them into batches of `batch`, the last one shorter;
  //   - compute the ceilings in integers, (a + b - 1) / b: no doubles, no std::ceil;
  //   - images, batch or ranks 0 or negative throws std::invalid_argument.
  (void)images, (void)batch, (void)ranks;
  throw Error("updates_per_epoch: not written yet (write the TODO in starter.cpp)");
}

double scaled_lr(double base_lr, int64_t base_batch, int64_t effective_batch) {
  // TODO: the linear scaling rule, base_lr * effective_batch / base_batch. Throw
  // std::invalid_argument when base_lr is not > 0 (write !(base_lr > 0): NaN too) or a batch
  // is 0 or negative.
  (void)base_lr, (void)base_batch, (void)effective_batch;
  throw Error("scaled_lr: not written yet (write the TODO in starter.cpp)");
}

double warmup_lr(int64_t step, double base_lr, double target_lr, int64_t warmup_steps) {
  // TODO: the gradual warm-up, as PyTorch's LinearLR computes it, with f = base_lr / target_lr:
  //     lr(step) = target_lr * (f + (1 - f) * min(step, warmup_steps) / warmup_steps)
  // Step 0 gives base_lr, step warmup_steps and later give target_lr. Throw
  // std::invalid_argument when step < 0, warmup_steps <= 0, or a learning rate is not > 0.
  (void)step, (void)base_lr, (void)target_lr, (void)warmup_steps;
  throw Error("warmup_lr: not written yet (write the TODO in starter.cpp)");
}

}  // namespace exercise
