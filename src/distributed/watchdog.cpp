#include "distributed/watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>

#include "util/trace.h"

namespace lockstep {

namespace {
// Every live group's watchdog, by group id, for the responders that answer other ranks.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<uint64_t, Watchdog*>& registry() {
  static std::map<uint64_t, Watchdog*> groups;
  return groups;
}

std::string seconds_str(double s) {
  std::ostringstream out;
  out.precision(s < 10 ? 2 : 3);
  out << s;
  return out.str();
}
}  // namespace

Watchdog::Watchdog(uint64_t group_id, int rank, int size, double timeout_s, WatchdogHooks hooks)
    : group_id_(group_id), rank_(rank), size_(size), timeout_s_(timeout_s), hooks_(std::move(hooks)) {
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[group_id_] = this;
  }
  // One rank alone has nobody to wait for.
  if (timeout_s_ > 0.0 && size_ > 1) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(group_id_);
  }
  stop();
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::started(const CollectiveInfo& info, std::shared_ptr<Work> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Finished ones are forgotten here too, so the list stays short without the thread.
  drop_finished_locked();
  running_.push_back({info, std::move(work), std::chrono::steady_clock::now()});
  last_ = info;
}

PeerProgress Watchdog::progress() {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_finished_locked();
  PeerProgress p;
  p.started = last_.seq;
  p.finished = running_.empty();
  p.waiting_in = !running_.empty() ? running_.front().info.describe()
                 : last_.seq > 0   ? last_.describe()
                                   : "none";
  return p;
}

std::optional<PeerProgress> Watchdog::progress_of_group(uint64_t group_id) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto found = registry().find(group_id);
  if (found == registry().end()) return std::nullopt;
  return found->second->progress();
}

void Watchdog::drop_finished_locked() {
  while (!running_.empty() && running_.front().work->is_completed()) running_.pop_front();
}

void Watchdog::run() {
  set_trace_thread_name("watchdog");
  // Often enough that a deadline is kept to a tenth of itself, rarely enough to cost nothing.
  const auto tick = std::chrono::duration<double>(std::clamp(timeout_s_ / 10.0, 0.01, 0.1));
  std::unique_lock<std::mutex> lock(mutex_);
  //! [overdue]
  while (!stop_requested_.wait_for(lock, tick, [this] { return stopping_; })) {
    // Collectives finish in the order they started: only the oldest can be overdue first.
    drop_finished_locked();
    if (!running_.empty()) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - running_.front().at).count();
      if (waited > timeout_s_) {
        const Started overdue = running_.front();
        lock.unlock();
        expire(overdue, waited);  // asks the others where they are, prints, ends the job
      }
    }
    //! [overdue]
    if (hooks_.async_error) {
      lock.unlock();
      const std::string error = hooks_.async_error();
      if (!error.empty()) fail(error);
      lock.lock();
    }
  }
}

void Watchdog::expire(const Started& overdue, double waited_s) {
  const uint64_t seq = overdue.info.seq;
  const std::string mine = overdue.info.describe();
  std::vector<std::string> lines;
  lines.push_back("watchdog: " + mine + " has not finished " + seconds_str(waited_s) +
                  " s after this rank started it (the collective timeout is " + seconds_str(timeout_s_) + " s).");
  // Where are the others? Each answers from a thread of its own, unless it is frozen.
  std::vector<int> missing;
  if (!hooks_.ask_peers) {
    lines.push_back("  (the other ranks cannot be asked where they are: the MPI library does not allow "
                    "MPI_THREAD_MULTIPLE)");
  } else {
    const std::vector<std::optional<PeerProgress>> peers = hooks_.ask_peers(group_id_);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const std::string who = "  rank " + std::to_string(r);
      const std::optional<PeerProgress> p = r < static_cast<int>(peers.size()) ? peers[r] : std::nullopt;
      if (!p) {
        missing.push_back(r);
        lines.push_back(who + " did not answer: it is stopped (SIGSTOP, a debugger) or frozen; it never reached #" +
                        std::to_string(seq) + ".");
      } else if (p->started < seq) {
        missing.push_back(r);
        lines.push_back(who + " is alive but never reached #" + std::to_string(seq) + ": its last collective is " +
                        p->waiting_in + (p->finished ? ", finished." : ", still waiting."));
      } else if (!p->finished && p->waiting_in == mine) {
        lines.push_back(who + " waits in the same collective.");
      } else if (!p->finished) {
        lines.push_back(who + " waits in " + p->waiting_in +
                        ": not the same collective (LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL names where the ranks' "
                        "collectives first differ).");
      } else {
        lines.push_back(who + " has finished every collective it started, up to #" + std::to_string(p->started) +
                        ": its collectives paired with different ones of this rank (LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL "
                        "names where they first differ).");
      }
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
    lines.push_back("Rank(s) that never reached #" + std::to_string(seq) + ": " + list + ".");
  }
  lines.push_back("Ending the job (exit status " + std::to_string(kWatchdogExitCode) +
                  "). To wait longer: $LOCKSTEP_COLLECTIVE_TIMEOUT (SECONDS) or ProcessGroupOptions::timeout "
                  "(0 turns the watchdog off).");
  end(lines);
}

void Watchdog::fail(const std::string& error) {
  end({"watchdog: the communication backend failed: " + error, "Ending the job (exit status " +
                                                                   std::to_string(kWatchdogExitCode) + ")."});
}

void Watchdog::end(const std::vector<std::string>& lines) {
  const std::string prefix = "[rank " + std::to_string(rank_) + "/" + std::to_string(size_) + "] ";
  std::string text;
  for (const std::string& line : lines) text += prefix + line + "\n";
  // One write, so that the messages of several ranks do not interleave mid-line.
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  if (hooks_.abort_communicator) hooks_.abort_communicator();
  if (hooks_.end_job) hooks_.end_job(kWatchdogExitCode);
  std::_Exit(kWatchdogExitCode);
}

}  // namespace lockstep
