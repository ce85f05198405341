#include "common/training_loss.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace lockstep {

void check_training_loss(double loss_sum, int64_t steps, int64_t last_step, int epoch) {
  if (steps == 0 || std::isfinite(loss_sum)) return;
  const std::string value = std::isnan(loss_sum) ? "nan" : loss_sum > 0 ? "inf" : "-inf";
  const std::string when = steps == 1 ? "at step " + std::to_string(last_step)
                                      : "in steps " + std::to_string(last_step - steps + 1) + "-" +
                                            std::to_string(last_step);
  throw Error("the training loss became " + value + " " + when + " (epoch " + std::to_string(epoch) +
              "): the training diverged; try a lower --lr");
}

}  // namespace lockstep
