#include "common/preemption.h"

#include <atomic>
#include <csignal>
#include <cstdint>

#include "distributed/collective_caller.h"
#include "distributed/init_process_group.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace {

// The signals that ask a run to stop, and the first one received (0: none). A lock-free atomic
// is one of the few things a signal handler may touch.
constexpr int kStopSignals[] = {SIGUSR1, SIGTERM, SIGINT};
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");
constexpr size_t kSignalCount = sizeof(kStopSignals) / sizeof(kStopSignals[0]);
struct sigaction previous[kSignalCount];

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signal)) return;
  // A second signal: whoever sent it wants the process gone now, as without a handler.
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
  }
  return "a signal";
}

// Whether `arg` reads the same to a POSIX shell without quotes.
bool needs_no_quotes(const std::string& arg) {
  if (arg.empty()) return false;
  for (const char c : arg) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string("_-./:=,+@%").find(c) != std::string::npos;
    if (!plain) return false;
  }
  return true;
}

// `arg` for a POSIX shell: as it is, or in single quotes (a quote inside as '\'').
std::string shell_quoted(const std::string& arg) {
  if (needs_no_quotes(arg)) return arg;
  std::string quoted = "'";
  for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

StopSignals::StopSignals() {
  first_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Restarted, so that a read or a wait the signal interrupts goes on as if nothing happened.
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < kSignalCount; ++i) sigaction(kStopSignals[i], &action, &previous[i]);
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < kSignalCount; ++i) sigaction(kStopSignals[i], &previous[i], nullptr);
}

int StopSignals::received() const { return first_signal.load(); }

// The watch's collectives are one flag at every boundary on every rank: DETAIL's fingerprint
// checks would only add a second collective to each.
PreemptionWatch::PreemptionWatch(bool enabled) {
  if (!enabled) return;
  signals_.emplace();
  group_ = &new_group(DistributedDebug::off);
}

bool PreemptionWatch::should_stop() {
  if (stopping_ || group_ == nullptr) return stopping_;
  // The largest flag over the ranks: one rank's signal stops all of them here.
  const CollectiveCaller caller("preemption check");
  // flag: (1) i32, 1 if this rank received a signal, then the largest over the ranks
  const Tensor flag = full({1}, signals_->received() != 0 ? 1.0 : 0.0, TensorOptions().dtype(DType::i32));
  group_->all_reduce(flag, ReduceOp::Max);
  stopping_ = flag.item() > 0.0;
  return stopping_;
}

std::string PreemptionWatch::reason() const {
  const int signal = signals_ ? signals_->received() : 0;
  return signal != 0 ? signal_name(signal) : "another rank's signal";
}

std::string resume_command(const std::vector<std::string>& args, int world_size, const std::string& checkpoint) {
  std::string command = world_size > 1 ? "mpirun -n " + std::to_string(world_size) : "";
  for (size_t i = 0; i < args.size(); ++i) {
    // The old --resume (with its value, or as --resume=FILE) gives way to the new one.
    if (args[i] == "--resume") {
      ++i;
      continue;
    }
    if (args[i].rfind("--resume=", 0) == 0) continue;
    command += (command.empty() ? "" : " ") + shell_quoted(args[i]);
  }
  return command + " --resume " + shell_quoted(checkpoint);
}

}  // namespace lockstep
