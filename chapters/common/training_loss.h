/// \file
/// A training run whose loss becomes inf or NaN stops there, naming the steps, rather than
/// training on to `final_loss=nan` and an exit status of 0.
#pragma once

#include <cstdint>

namespace lockstep {

/// Throws lockstep::Error when `loss_sum`, the sum of the training losses of the `steps` steps
/// that end with step `last_step` (steps counted from 1 over all epochs) of epoch `epoch`, is inf
/// or NaN: a sum is finite only when every loss in it is. The sentence names the steps and what
/// to try, e.g. "the training loss became nan at step 37 (epoch 1): the training diverged; try a
/// lower --lr", or "... in steps 21-40 (epoch 1) ..." for a sum of several. A sum of no steps
/// (`steps` 0) passes.
///
/// A chapter calls this where it reads the loss anyway, since reading a value that lives on a
/// GPU makes the CPU wait for the GPU: the progress window, the epoch's end, `--metrics` rows.
void check_training_loss(double loss_sum, int64_t steps, int64_t last_step, int epoch);

}  // namespace lockstep
