#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace lockstep {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled && isatty(STDOUT_FILENO)) {}

void ProgressBar::update(int64_t step, const std::string& status) {
  // Redrawing costs a system call: ten times a second is plenty for the eye.
  if (!enabled_ || (step < total_ && since_draw_.seconds() < 0.1)) return;
  since_draw_.reset();
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * step / total_) : kWidth;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < filled; ++i) bar[i] = '=';
  if (filled < kWidth) bar[filled] = '>';
  std::printf("\r%s [%s] %lld/%lld %s", label_.c_str(), bar.c_str(), static_cast<long long>(step),
              static_cast<long long>(total_), status.c_str());
  std::fflush(stdout);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  // Overwrite the bar with spaces, then return to the start of the line.
  std::printf("\r%*s\r", 100, "");
  std::fflush(stdout);
}

}  // namespace lockstep
