#include "common/step_metrics.h"

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
  file_.open(path);
  LOCKSTEP_CHECK(file_.good(), "--metrics ", path, ": cannot write this file");
  file_ << "step,epoch,loss,seconds";
  for (const std::string& column : extra_columns) file_ << "," << column;
  file_ << "\n";
}

void StepMetrics::record(int64_t step, int epoch, const Tensor& loss, const Timer& epoch_timer,
                         const std::vector<double>& extra) {
  if (!file_.is_open()) return;
  LOCKSTEP_CHECK(extra.size() == extra_columns_, "StepMetrics::record: ", extra.size(), " extra values for ",
                 extra_columns_, " extra columns");
  const double value = loss.item();
  const double now = epoch_timer.seconds();
  if (epoch != epoch_) epoch_seconds_ = 0.0;
  // Flushed row by row, so that a write that fails (a full disk) is seen at its step, not lost
  // in the destructor's unchecked flush.
  file_ << step << "," << epoch << "," << value << "," << now - epoch_seconds_;
  for (double v : extra) file_ << "," << v;
  file_ << "\n" << std::flush;
  epoch_ = epoch;
  epoch_seconds_ = now;
  LOCKSTEP_CHECK(file_.good(), "--metrics: writing the row of step ", step, " failed (is the disk full?)");
  // The loss has been read anyway: a diverged run stops at its very step (after its row).
  check_training_loss(value, 1, step, epoch);
}

}  // namespace lockstep
