// Exercise ch07_updates_per_epoch: the three functions the student writes, declared for test.cpp
// and for the student's file (a file kept elsewhere, FILE=..., needs a copy of this header beside it).
#pragma once

#include <cstdint>

namespace exercise {

/// Optimiser steps one rank makes in one epoch of `images` training images, with `ranks` ranks
/// each loading `batch` images per step: DistributedSampler (drop_last false: it pads by
/// repeating indices so that every rank gets ceil(images / ranks)), then DataLoader (drop_last
/// false: a last short batch counts). Throws std::invalid_argument when images, batch or ranks
/// is 0 or negative.
int64_t updates_per_epoch(int64_t images, int64_t batch, int64_t ranks);

/// The linear scaling rule: base_lr, tuned for a batch of base_batch, scaled to a batch of
/// effective_batch: base_lr * effective_batch / base_batch. Throws std::invalid_argument when
/// base_lr is not > 0 (NaN included) or a batch is 0 or negative.
double scaled_lr(double base_lr, int64_t base_batch, int64_t effective_batch);

/// Goyal et al.'s gradual warm-up, per step: the learning rate of step `step` (0-based) when it
/// ramps linearly from base_lr to target_lr over warmup_steps steps, then stays at target_lr.
/// PyTorch's LinearLR(start_factor = f = base_lr / target_lr, total_iters = warmup_steps):
///     lr(t) = target_lr * (f + (1 - f) * min(t, warmup_steps) / warmup_steps)
/// Throws std::invalid_argument when step < 0, warmup_steps <= 0, or a learning rate is not > 0.
double warmup_lr(int64_t step, double base_lr, double target_lr, int64_t warmup_steps);

}  // namespace exercise
