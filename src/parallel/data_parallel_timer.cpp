#include "parallel/data_parallel_timer.h"

#include <algorithm>

#include "core/cuda/context.h"

namespace lockstep {

DataParallelTimer::DataParallelTimer(std::vector<Device> devices) {
  for (const Device device : devices) {
    if (device.is_cuda() && std::find(devices_.begin(), devices_.end(), device) == devices_.end()) {
      devices_.push_back(device);
    }
  }
}

DataParallelTimes DataParallelTimer::times() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return times_;
}

void DataParallelTimer::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  times_ = DataParallelTimes();
}

void DataParallelTimer::before_clock() {
  if (!synchronize_) return;
  for (const Device device : devices_) cuda::synchronize(device);
}

void DataParallelTimer::span_closed(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (name == "scatter") {
    times_.scatter += seconds;
  } else if (name == "replicate") {
    times_.replicate += seconds;
  } else if (name == "parallel_apply" || name == "forward") {
    // Every step has one forward phase: parallel_apply, or the module itself on one device.
    times_.forward += seconds;
    ++times_.steps;
  } else if (name == "gather") {
    times_.gather += seconds;
  } else if (name == "reduce") {
    times_.reduce += seconds;
  }
}

}  // namespace lockstep
