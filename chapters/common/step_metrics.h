/// \file
/// What `--metrics FILE` writes: one CSV row per training step, for the book's figures
/// (tools/figures/ draws the loss curves from it).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/regular_file.h"
#include "util/timer.h"

namespace lockstep {

/// Adds the `--metrics FILE` flag, read into `path`, with its help text (the columns).
CLI::Option* add_metrics_flag(CLI::App& app, std::string& path);

/// A CSV file with the header `step,epoch,loss,seconds` and one row per training step: the step
/// number (from 1, counted over all epochs), its epoch (from 1), its training loss, and its
/// wall time in seconds, then any columns a chapter adds (chapter 5: the loss scale and whether
/// the step was skipped). When no file was asked for, record() does nothing and costs nothing.
class StepMetrics {
 public:
  /// Opens `path` and writes the header; an empty path records nothing. Throws lockstep::Error
  /// with a sentence naming `--metrics` when the file cannot be written (check_output_file), so
  /// that a program fails before its training rather than after it.
  /// `extra_columns` name the columns after `seconds`.
  explicit StepMetrics(const std::string& path, const std::vector<std::string>& extra_columns = {});

  /// Writes the row of step `step` of epoch `epoch`. Reads `loss` (which makes the CPU wait for
  /// a GPU's work: the time is then the work's, not its queueing's) and then `epoch_timer`, the
  /// clock started with the epoch; the row's seconds are the time since the previous step of
  /// the same epoch, or since the epoch started. `extra` holds the values of the extra columns.
  /// A loss that is inf or NaN ends the run after its row (check_training_loss).
  void record(int64_t step, int epoch, const Tensor& loss, const Timer& epoch_timer,
              const std::vector<double>& extra = {});

 private:
  UniqueFile file_;  // null when no file was asked for
  size_t extra_columns_ = 0;
  int epoch_ = 0;             // the epoch of the last row
  double epoch_seconds_ = 0;  // epoch_timer's reading at the last row
};

}  // namespace lockstep
