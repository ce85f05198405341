/// \file
/// A stopwatch for the timings the chapters print (wall-clock, steady).
#pragma once

#include <chrono>

namespace lockstep {

/// Measures elapsed wall-clock time since construction or the last reset().
class Timer {
 public:
  /// Starts timing now.
  Timer() : start_(std::chrono::steady_clock::now()) {}
  /// Restarts timing now.
  void reset() { start_ = std::chrono::steady_clock::now(); }
  /// Seconds since the start.
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lockstep
