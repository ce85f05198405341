/// \file
/// The timing layer of DataParallel: it sums the spans that the steps of DataParallel open
/// (util/trace.h), so that the algorithm itself holds no clock. scatter, replicate,
/// parallel_apply and gather each open a span of category "parallel" named after themselves;
/// so do the gradients' way back during backward ("reduce") and the one-device forward pass
/// ("forward").
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "util/trace.h"

namespace lockstep {

/// Seconds spent in each phase of DataParallel's steps, summed since the last reset. Without
/// profiling a GPU phase's time is only the time to queue its work.
struct DataParallelTimes {
  double scatter = 0.0;    ///< Cutting the batch and sending the chunks to their devices.
  double replicate = 0.0;  ///< Copying parameters and buffers into the replicas.
  double forward = 0.0;    ///< parallel_apply: the replicas' forward passes.
  double gather = 0.0;     ///< Joining the outputs on the output device.
  double reduce = 0.0;     ///< During backward: sending replicas' gradients back to devices[0].
  int64_t steps = 0;       ///< Forward passes counted.
};

/// Sums the spans of category "parallel" into DataParallelTimes, one field per phase, and
/// counts a step per forward phase. It receives them through a SpanObservation, from every
/// DataParallel step run in the process while it is observing.
///
/// \see @ref chapter3 "Chapter 3: DataParallel", which introduces it.
class DataParallelTimer : public SpanObserver {
 public:
  /// Waits for `devices` (the CUDA ones) before every clock reading while synchronising.
  explicit DataParallelTimer(std::vector<Device> devices);

  /// With `enabled`, every phase waits for the devices as it starts and as it ends, so that it
  /// times what the work took rather than how long it took to queue.
  void set_synchronize(bool enabled) { synchronize_ = enabled; }
  /// The sums so far.
  DataParallelTimes times() const;
  /// Sets every sum back to zero.
  void reset();

  /// Waits for the devices when synchronising.
  void before_clock() override;
  /// Adds `seconds` to the phase that `name` names; other spans are ignored.
  void span_closed(const std::string& name, double seconds) override;

 private:
  std::vector<Device> devices_;  // the CUDA devices to wait for, each once
  std::atomic<bool> synchronize_{false};
  mutable std::mutex mutex_;  // spans close on the caller's thread and on backward's
  DataParallelTimes times_;
};

}  // namespace lockstep
