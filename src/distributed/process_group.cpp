#include "distributed/process_group.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"
#include "distributed/agreed_error.h"
#include "distributed/collective_caller.h"
#include "distributed/watchdog.h"

namespace lockstep {

namespace {
// The backends read and write a tensor as one block of memory.
void check_contiguous(const char* collective, const char* role, const Tensor& t) {
  LOCKSTEP_CHECK(t.defined(), collective, ": the ", role, " tensor is undefined");
  LOCKSTEP_CHECK(t.is_contiguous(), collective, ": expected a contiguous ", role, " tensor, got shape ",
                 shape_str(t.shape()), " with strides ", shape_str(t.strides()), " (call .contiguous() first)");
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

// What a collective is, before it gets its sequence number.
CollectiveInfo info_of(const char* op, const Tensor& sent, const Tensor& written) {
  CollectiveInfo info;
  info.op = op;
  info.dtype = sent.dtype();
  info.numel = sent.numel();
  info.bytes = written.nbytes();
  info.caller = CollectiveCaller::current();
  return info;
}

// The process's groups, numbered in the order they are created (the same on every rank).
std::atomic<uint64_t> groups_created{0};

// An average of integers would have to round; PyTorch refuses it too.
void check_op(const char* collective, const Tensor& t, ReduceOp op) {
  LOCKSTEP_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), collective, ": ReduceOp::Avg needs a floating dtype, got ",
                 dtype_name(t.dtype()), " (use ReduceOp::Sum and divide)");
}

// all_gather and reduce_scatter move slices of `big` to and from `small`: one per rank.
void check_sliced(const char* collective, const Tensor& big, const Tensor& small, int ranks) {
  check_contiguous(collective, "input", big);
  check_contiguous(collective, "output", small);
  LOCKSTEP_CHECK(big.dtype() == small.dtype() && big.device() == small.device(), collective,
                 ": expected input and output of one dtype and device, got ", dtype_name(big.dtype()), " on ",
                 big.device().str(), " and ", dtype_name(small.dtype()), " on ", small.device().str());
  LOCKSTEP_CHECK(big.numel() == small.numel() * ranks, collective, ": expected the larger tensor to hold ", ranks,
                 " (the world size) times the elements of the smaller, got shapes ", shape_str(big.shape()), " and ",
                 shape_str(small.shape()));
}
// What each rank tells the others when a group starts, sent as bytes: its timeout, its debug
// level, and why it could not resolve them (empty when it could), cut to fit.
struct Settings {
  double timeout;
  int32_t debug;
  int32_t padding;
  char problem[240];
};

// The ranks' settings problems as one message: the problem alone when every rank has the same
// one, else each rank's after its number; empty when no rank has one.
std::string settings_problems(const std::vector<Settings>& ranks) {
  const auto same_as_rank_0 = [&](const Settings& s) { return std::strcmp(s.problem, ranks[0].problem) == 0; };
  if (ranks[0].problem[0] != '\0' && std::all_of(ranks.begin(), ranks.end(), same_as_rank_0)) {
    return std::string(ranks[0].problem) + (ranks.size() > 1 ? " (on every rank)" : "");
  }
  std::string problems;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].problem[0] == '\0') continue;
    problems += detail::concat(problems.empty() ? "" : "; ", "rank ", r, ": ", ranks[r].problem);
  }
  return problems;
}

}  // namespace

ProcessGroup::ProcessGroup(int rank, int size, const ProcessGroupOptions& options)
    : rank_(rank), size_(size), id_(groups_created++) {
  LOCKSTEP_CHECK(size >= 1 && rank >= 0 && rank < size, "ProcessGroup: expected 0 <= rank < size, got rank ", rank,
                 " of ", size);
  // A setting this rank cannot read is not thrown here: the other ranks would wait for this one
  // in start_watchdog's exchange forever. It travels with the settings, and every rank throws it.
  try {
    timeout_ = options.resolved_timeout();
    debug_ = options.resolved_debug();
  } catch (const Error& e) {
    settings_problem_ = e.what();
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::start_watchdog(WatchdogHooks hooks) {
  Settings mine{timeout_, static_cast<int32_t>(debug_), 0, {}};
  std::strncpy(mine.problem, settings_problem_.c_str(), sizeof(mine.problem) - 1);
  const std::vector<uint8_t> all = gather_bytes(&mine, sizeof(mine), "process group set-up");
  std::vector<Settings> ranks(static_cast<size_t>(size_));
  std::memcpy(ranks.data(), all.data(), all.size());
  // A rank that could not read its settings: every rank names it (or says all had it).
  if (const std::string problems = settings_problems(ranks); !problems.empty()) throw AgreedError(problems);
  // Settings every rank could read, but different ones.
  for (int r = 0; r < size_; ++r) {
    const Settings& theirs = ranks[r];
    if (theirs.timeout != mine.timeout) {
      throw AgreedError(ErrorKind::CollectiveTimeout,
                        detail::concat("process group: the ranks use different collective timeouts: rank ", r, " has ",
                                       theirs.timeout, " s, rank ", rank_, " has ", timeout_,
                                       " s; give every rank the same ProcessGroupOptions::timeout or "
                                       "$LOCKSTEP_COLLECTIVE_TIMEOUT"));
    }
    if (theirs.debug != mine.debug) {
      throw AgreedError(detail::concat(
          "process group: the ranks use different debug levels: rank ", r, " has LOCKSTEP_DISTRIBUTED_DEBUG=",
          distributed_debug_name(static_cast<DistributedDebug>(theirs.debug)), ", rank ", rank_, " has ",
          distributed_debug_name(debug_),
          "; set it for every rank (mpirun -x LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL passes it to all)"));
    }
  }
  watchdog_ = std::make_unique<Watchdog>(id_, rank_, size_, timeout_, std::move(hooks));
}

void ProcessGroup::stop_watchdog() {
  if (watchdog_ != nullptr) watchdog_->stop();
}

std::vector<uint8_t> ProcessGroup::gather_bytes(const void* data, size_t size, const std::string& caller) {
  const Device device = message_device();
  const auto n = static_cast<int64_t>(size);
  Tensor mine = empty({n}, TensorOptions().dtype(DType::u8));
  std::memcpy(mine.data(), data, size);
  const Tensor all = empty({n * size_}, TensorOptions().dtype(DType::u8).device(device));
  const std::shared_ptr<Work> work = start_all_gather(all, mine.to(device));
  // Watched like any collective (a rank that never comes leaves this one waiting too), but not
  // numbered: it is the group's own message, not one of the program's collectives.
  if (watchdog_ != nullptr) {
    CollectiveInfo info = info_of("all_gather", mine, all);
    info.seq = seq_;
    info.caller = caller;
    watchdog_->started(info, work);
  }
  work->wait();
  const Tensor host = all.to(Device::cpu());
  const auto* bytes = static_cast<const uint8_t*>(host.data());
  return std::vector<uint8_t>(bytes, bytes + host.numel());
}

void ProcessGroup::compare_fingerprints(const CollectiveInfo& info) {
  const Fingerprint mine = Fingerprint::of(info);
  const std::vector<uint8_t> all =
      gather_bytes(&mine, sizeof(mine), "the fingerprint check before #" + std::to_string(info.seq));
  std::vector<Fingerprint> prints(static_cast<size_t>(size_));
  std::memcpy(prints.data(), all.data(), all.size());
  // Every rank holds the same table, so every rank names the same difference.
  std::string differences;
  for (int r = 1; r < size_; ++r) {
    if (prints[r].matches(prints[0])) continue;
    differences += "; rank " + std::to_string(r) + " calls " + prints[r].describe();
  }
  LOCKSTEP_CHECK(differences.empty(), "the ranks call different collectives (LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL): rank 0 calls ",
                 prints[0].describe(), differences,
                 ". Every rank must start the same collectives in the same order with the same sizes");
}

double CommunicationLedger::total_bytes() const {
  double total = 0;
  for (const auto& [op, sent] : bytes) total += sent;
  return total;
}

CommunicationLedger ProcessGroup::communication_ledger() const {
  const std::lock_guard<std::mutex> lock(ledger_mutex_);
  return ledger_;
}

void ProcessGroup::reset_communication_ledger() {
  const std::lock_guard<std::mutex> lock(ledger_mutex_);
  ledger_ = CommunicationLedger();
}

std::shared_ptr<Work> ProcessGroup::run(CollectiveInfo info, const Tensor& written,
                                        const std::function<std::shared_ptr<Work>()>& start) {
  info.seq = ++seq_;
  {
    // What the ring algorithm sends of the B bytes this rank contributes (CommunicationLedger).
    const double b = static_cast<double>(info.numel) * static_cast<double>(element_size(info.dtype));
    const double n = size_;
    const double sent = info.op == "all_reduce"       ? 2 * b * (n - 1) / n
                        : info.op == "all_gather"     ? b * (n - 1)
                        : info.op == "reduce_scatter" ? b * (n - 1) / n
                        : info.op == "broadcast"      ? b * (n - 1) / n
                                                      : 0.0;
    const std::lock_guard<std::mutex> lock(ledger_mutex_);
    ledger_.calls[info.op] += 1;
    ledger_.bytes[info.op] += sent;
  }
  if (debug_ == DistributedDebug::detail && size_ > 1) compare_fingerprints(info);
  if (written.defined()) increment_version(written);
  std::shared_ptr<Work> work = start();
  if (watchdog_ != nullptr) watchdog_->started(info, work);
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& tensor, ReduceOp op) {
  check_contiguous("all_reduce", "input", tensor);
  check_op("all_reduce", tensor, op);
  CollectiveInfo info = info_of("all_reduce", tensor, tensor);
  info.reduce = reduce_name(op);
  return run(info, tensor, [&] { return start_all_reduce(tensor, op); });
}

std::shared_ptr<Work> ProcessGroup::broadcast_async(const Tensor& tensor, int root) {
  check_contiguous("broadcast", "input", tensor);
  LOCKSTEP_CHECK(root >= 0 && root < size_, "broadcast: expected a root rank in [0, ", size_, "), got ", root);
  CollectiveInfo info = info_of("broadcast", tensor, tensor);
  info.root = root;
  return run(info, tensor, [&] { return start_broadcast(tensor, root); });
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(const Tensor& output, const Tensor& input) {
  check_sliced("all_gather", output, input, size_);
  return run(info_of("all_gather", input, output), output, [&] { return start_all_gather(output, input); });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_sliced("reduce_scatter", input, output, size_);
  check_op("reduce_scatter", input, op);
  CollectiveInfo info = info_of("reduce_scatter", input, output);
  info.reduce = reduce_name(op);
  return run(info, output, [&] { return start_reduce_scatter(output, input, op); });
}

std::shared_ptr<Work> ProcessGroup::barrier_async() {
  CollectiveInfo info;
  info.op = "barrier";
  info.caller = CollectiveCaller::current();
  return run(info, Tensor(), [&] { return start_barrier(); });
}

}  // namespace lockstep
