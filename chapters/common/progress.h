/// \file
/// A one-line progress bar for training loops, drawn only when stdout is a terminal (so logs
/// and tests see clean lines).
#pragma once

#include <cstdint>
#include <string>

#include "util/timer.h"

namespace lockstep {

/// Draws `label [=====>    ] 120/469 loss 0.4312 3120 samples/s` in place (returning to the line start).
class ProgressBar {
 public:
  /// A bar for `total` steps; disabled (draws nothing) when `enabled` is false or stdout is not
  /// a terminal.
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  /// Marks `step` steps done; `status` is shown after the counts (e.g. the running loss).
  void update(int64_t step, const std::string& status = "");
  /// Erases the bar so the next line prints cleanly.
  void finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  Timer since_draw_;
};

}  // namespace lockstep
