/// \file
/// The collective watchdog (PyTorch's NCCL watchdog, for both of Lockstep's backends): a thread
/// per process group that watches the collectives this rank has started. When one has not
/// finished within the group's timeout, it asks the other ranks where they are, prints on this
/// rank which collective waits (operation, size, sequence number, caller) and which ranks never
/// reached it, and ends the job. Without it, a rank that froze, died silently or took another
/// path leaves the others spinning in a collective forever, printing nothing.
///
/// Every group also keeps its progress (the last collective it started, the oldest it still
/// waits for) where a watchdog of another rank can ask for it: Watchdog::progress_of_group.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_info.h"
#include "distributed/work.h"

namespace lockstep {

/// What one rank says about one process group when another rank's watchdog asks.
struct PeerProgress {
  uint64_t started = 0;    ///< the sequence number of the last collective it started (0: none yet)
  bool finished = true;    ///< whether every collective it started has finished
  std::string waiting_in;  ///< the oldest unfinished collective, described, or else the last started
};

/// What a backend lends its watchdog. Empty functions are skipped.
struct WatchdogHooks {
  /// Asks every rank for its progress on group `group_id`; the result is indexed by rank, with
  /// nothing for a rank that did not answer in time (and for this rank).
  std::function<std::vector<std::optional<PeerProgress>>(uint64_t group_id)> ask_peers;
  /// An error the backend found on its own (NCCL's asynchronous errors), or "" if none.
  std::function<std::string()> async_error;
  /// Makes the backend give up its communication (ncclCommAbort), before the job ends.
  std::function<void()> abort_communicator;
  /// Ends every rank of the job with the given exit status (MPI_Abort). Must not return.
  std::function<void(int)> end_job;
};

/// The exit status of a job the watchdog ended.
constexpr int kWatchdogExitCode = 3;

/// Watches one process group's collectives on this rank (see the file comment).
class Watchdog {
 public:
  /// Watches the group `group_id` (this process's rank `rank` of `size`, backend `backend`),
  /// ending the job when a collective takes longer than `timeout_s` seconds (0: never; the
  /// progress is still kept for other ranks to ask).
  Watchdog(uint64_t group_id, int rank, int size, double timeout_s, WatchdogHooks hooks);
  /// Stops the thread; collectives still running are no longer watched.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;             ///< Registered by address.
  Watchdog& operator=(const Watchdog&) = delete;  ///< Registered by address.

  /// Records that this rank started `info`, whose handle is `work`: from now its deadline runs.
  void started(const CollectiveInfo& info, std::shared_ptr<Work> work);
  /// This rank's progress on the group.
  PeerProgress progress();
  /// Stops watching (a backend about to tear down what the hooks use calls it first).
  void stop();

  /// The progress of this process's group `group_id`, if it exists: what a responder sends to
  /// a watchdog of another rank.
  static std::optional<PeerProgress> progress_of_group(uint64_t group_id);

 private:
  struct Started {
    CollectiveInfo info;
    std::shared_ptr<Work> work;
    std::chrono::steady_clock::time_point at;
  };
  // The thread: pops finished collectives, and ends the job when the oldest is overdue.
  void run();
  // Forgets collectives that have finished, oldest first (they finish in order).
  void drop_finished_locked();
  // Prints what waits and who is missing, then ends the job. Never returns.
  [[noreturn]] void expire(const Started& overdue, double waited_s);
  // Prints the backend's own error, then ends the job. Never returns.
  [[noreturn]] void fail(const std::string& error);
  // Writes `lines` to stderr in one piece, each with this rank's prefix, and ends the job.
  [[noreturn]] void end(const std::vector<std::string>& lines);

  const uint64_t group_id_;
  const int rank_;
  const int size_;
  const double timeout_s_;
  const WatchdogHooks hooks_;
  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  std::deque<Started> running_;  // started and not known to have finished, oldest first
  CollectiveInfo last_;          // the last collective started (seq 0: none)
  std::thread thread_;
};

}  // namespace lockstep
