// Exercise ch07_updates_per_epoch: the reference solution.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "updates_per_epoch.h"

namespace exercise {

namespace {
// ceil(a / b) for a >= 0, b >= 1, in integers: a double loses exactness past 2^53, and
// std::ceil(a / b) on integers would floor first.
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void require_positive(int64_t value, const char* function, const char* name) {
  if (value <= 0)
    throw std::invalid_argument(std::string(function) + ": " + name + " must be 1 or more, got " + std::to_string(value));
}

void require_positive(double value, const char* function, const char* name) {
  // Written as !(value > 0) so that NaN is refused too: every comparison with NaN is false.
  if (!(value > 0.0))
    throw std::invalid_argument(std::string(function) + ": " + name + " must be > 0, got " + std::to_string(value));
}
}  // namespace

int64_t updates_per_epoch(int64_t images, int64_t batch, int64_t ranks) {
  require_positive(images, "updates_per_epoch", "images");
  require_positive(batch, "updates_per_epoch", "batch");
  require_positive(ranks, "updates_per_epoch", "ranks");
  // DistributedSampler without drop_last: every rank gets ceil(images / ranks) indices, the
  // order padded with repeated images to a multiple of the ranks.
  const int64_t per_rank = ceil_div(images, ranks);
  // DataLoader without drop_last: the last, shorter batch is a step too.
  return ceil_div(per_rank, batch);
}

double scaled_lr(double base_lr, int64_t base_batch, int64_t effective_batch) {
  require_positive(base_lr, "scaled_lr", "base_lr");
  require_positive(base_batch, "scaled_lr", "base_batch");
  require_positive(effective_batch, "scaled_lr", "effective_batch");
  return base_lr * static_cast<double>(effective_batch) / static_cast<double>(base_batch);
}

double warmup_lr(int64_t step, double base_lr, double target_lr, int64_t warmup_steps) {
  if (step < 0) throw std::invalid_argument("warmup_lr: step must be 0 or more, got " + std::to_string(step));
  require_positive(base_lr, "warmup_lr", "base_lr");
  require_positive(target_lr, "warmup_lr", "target_lr");
  require_positive(warmup_steps, "warmup_lr", "warmup_steps");
  // LinearLR's closed form with start_factor f = base / target and end_factor 1, in its order.
  const double f = base_lr / target_lr;
  const double t = static_cast<double>(std::min(step, warmup_steps));
  const double total = static_cast<double>(warmup_steps);
  return target_lr * (f + (1.0 - f) * t / total);
}

}  // namespace exercise
