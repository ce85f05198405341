#include "common/step_metrics.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "common/program.h"
#include "common/training_loss.h"
#include "core/error.h"

namespace lockstep {

CLI::Option* add_metrics_flag(CLI::App& app, std::string& path) {
  return app.add_option("--metrics", path, "write one CSV row per training step to this file: step,epoch,loss,seconds "
                                           "(seconds: the step's wall time; the loss is read every step). Test "
                                           "accuracy is on the 'epoch N:' lines of the output");
}

StepMetrics::StepMetrics(const std::string& path, const std::vector<std::string>& extra_columns)
    : extra_columns_(extra_columns.size()) {
  if (path.empty()) return;
  check_output_file("--metrics", path);
  file_ = fopen_regular_file("--metrics", path, "w");
  LOCKSTEP_CHECK(file_ != nullptr, "--metrics ", path, ": cannot write this file (", std::strerror(errno), ")");
  std::string header = "step,epoch,loss,seconds";
  for (const std::string& column : extra_columns) header += "," + column;
  std::fprintf(file_.get(), "%s\n", header.c_str());
}

void StepMetrics::record(int64_t step, int epoch, const Tensor& loss, const Timer& epoch_timer,
                         const std::vector<double>& extra) {
  if (file_ == nullptr) return;
  LOCKSTEP_CHECK(extra.size() == extra_columns_, "StepMetrics::record: ", extra.size(), " extra values for ",
                 extra_columns_, " extra columns");
  const double value = loss.item();
  const double now = epoch_timer.seconds();
  if (epoch != epoch_) epoch_seconds_ = 0.0;
  // Flushed row by row, so that a write that fails (a full disk) is seen at its step, not lost
  // in the destructor's unchecked flush.
  std::ostringstream row;
  row << step << "," << epoch << "," << value << "," << now - epoch_seconds_;
  for (double v : extra) row << "," << v;
  row << "\n";
  const std::string text = row.str();
  const bool written = std::fwrite(text.data(), 1, text.size(), file_.get()) == text.size();
  epoch_ = epoch;
  epoch_seconds_ = now;
  LOCKSTEP_CHECK(written && std::fflush(file_.get()) == 0, "--metrics: writing the row of step ", step,
                 " failed (is the disk full?)");
  // The loss has been read anyway: a diverged run stops at its very step (after its row).
  check_training_loss(value, 1, step, epoch);
}

}  // namespace lockstep
