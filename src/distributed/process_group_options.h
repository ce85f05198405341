/// \file
/// The safety settings of a process group: how long a collective may wait before the watchdog
/// ends the job, and whether ranks compare every collective before running it (PyTorch's
/// `init_process_group(timeout=...)` and `TORCH_DISTRIBUTED_DEBUG=DETAIL`).
///
/// Each setting comes, first found wins, from the code (ProcessGroupOptions::timeout, which the
/// chapters' `--collective-timeout` sets), from the environment (LOCKSTEP_COLLECTIVE_TIMEOUT in
/// seconds, LOCKSTEP_DISTRIBUTED_DEBUG=OFF|DETAIL), or from the defaults below.
#pragma once

#include <functional>
#include <optional>

namespace lockstep {

/// How much the ranks check each other's collectives (TORCH_DISTRIBUTED_DEBUG's levels, less
/// INFO).
enum class DistributedDebug {
  off,     ///< no extra messages: a mismatch shows as a hang (which the watchdog ends) or an MPI error
  detail,  ///< before each collective, the ranks compare its fingerprint and name the first mismatch
};

/// A process group's settings, set by chaining:
/// `ProcessGroupOptions().timeout(10).debug(DistributedDebug::detail)`.
class ProcessGroupOptions {
 public:
  /// The collective watchdog's deadline in seconds: a collective that has not finished this long
  /// after it started ends the job, with a message on every rank still alive. 0 turns the
  /// watchdog off. Finite and >= 0.
  ProcessGroupOptions& timeout(double seconds);
  /// The debug level (see DistributedDebug).
  ProcessGroupOptions& debug(DistributedDebug level) { debug_ = level; return *this; }

  /// The deadline in effect: the one set here, else $LOCKSTEP_COLLECTIVE_TIMEOUT, else
  /// kDefaultTimeout. A malformed variable is an error naming it.
  double resolved_timeout(const std::function<const char*(const char*)>& getenv) const;
  /// The debug level in effect: the one set here, else $LOCKSTEP_DISTRIBUTED_DEBUG, else off.
  DistributedDebug resolved_debug(const std::function<const char*(const char*)>& getenv) const;
  /// Both, read from the process's own environment.
  double resolved_timeout() const;
  /// The debug level in effect, read from the process's own environment.
  DistributedDebug resolved_debug() const;

  /// The default deadline, seconds: far beyond any single collective of the book's programs
  /// (which wait milliseconds), short enough that a student sees a hang explained within a
  /// minute. PyTorch's default is 10 minutes (NCCL) to 30 (others), for long production jobs.
  static constexpr double kDefaultTimeout = 60.0;

 private:
  std::optional<double> timeout_;
  std::optional<DistributedDebug> debug_;
};

/// "OFF" or "DETAIL".
const char* distributed_debug_name(DistributedDebug level);

}  // namespace lockstep
