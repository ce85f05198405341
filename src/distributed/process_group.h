/// \file
/// ProcessGroup: the collectives every rank of a job calls together (torch.distributed's
/// ProcessGroup); each returns a Work (distributed/work.h), the handle of one that may still be
/// running.
///
/// A collective is a promise made by *every* rank: all of them call the same collectives, in the
/// same order, with tensors of the same size and dtype. A rank that skips one (or calls them in a
/// different order) leaves the others waiting forever: that is the "hang" users of data-parallel
/// training ask about. The checks here catch what one rank can see on its own (a tensor that is
/// not contiguous, a root outside the group). What only the group can see is covered by its
/// safety settings (ProcessGroupOptions): a watchdog ends the job when a collective waits past
/// its timeout, naming the ranks that never reached it, and in DETAIL debug mode the ranks
/// compare every collective's fingerprint before running it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/collective_info.h"
#include "distributed/process_group_options.h"
#include "distributed/work.h"
#include "tensor/tensor.h"

namespace lockstep {

class Watchdog;
struct WatchdogHooks;

/// How all_reduce and reduce_scatter combine the ranks' values (torch.distributed.ReduceOp).
enum class ReduceOp {
  Sum,  ///< the sum over ranks
  Avg,  ///< the sum divided by the number of ranks (floating dtypes only)
  Max,  ///< the largest value
};

/// The ranks of one job and the collectives between them. Each collective exists in two forms:
/// The bytes a rank sends in collectives, as the ring algorithms send them: for one of B bytes
/// per rank over N ranks, all_reduce 2B(N-1)/N (a reduce-scatter, then an all-gather),
/// reduce_scatter B(N-1)/N of its input, all_gather B(N-1) of its own shard B (the others'
/// shards pass through it), broadcast B(N-1)/N (a chain: every rank but the last forwards B,
/// averaged over ranks). What NCCL's rings send; MPI may choose other algorithms, sending as
/// much or more. The formulas of chapter 8 (2Ψ(N-1)/N per step for DDP, 3Ψ(N-1)/N for FSDP)
/// are sums of these.
struct CommunicationLedger {
  std::map<std::string, int64_t> calls;  ///< Collectives started, by operation ("all_reduce", ...).
  std::map<std::string, double> bytes;   ///< Bytes sent, by operation.
  /// Bytes sent by every operation together.
  double total_bytes() const;
};

/// `x_async(...)` starts it and returns its Work at once; `x(...)` starts it and waits. Tensors
/// are modified in place and must be contiguous; in one call they share a dtype and device. The
/// change counts in the modified tensor's Tensor::version() when the collective starts, as in
/// PyTorch (on every rank, the root of a broadcast included).
///
/// \see @ref chapter4 "Chapter 4: DistributedDataParallel", which introduces it.
class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  /// This process's rank, 0..size()-1.
  int rank() const { return rank_; }
  /// The number of ranks in the group (the world size).
  int size() const { return size_; }
  /// The backend's name: "mpi" or "nccl".
  virtual std::string backend_name() const = 0;
  /// The collective timeout in seconds (0: no watchdog); see ProcessGroupOptions::timeout.
  double timeout() const { return timeout_; }
  /// The debug level; see DistributedDebug.
  DistributedDebug debug() const { return debug_; }
  /// How many collectives this rank has started on the group: the last one's sequence number.
  uint64_t sequence_number() const { return seq_; }
  /// What this rank has sent through the group since it was made or the last reset.
  CommunicationLedger communication_ledger() const;
  /// Starts the communication ledger again from zero (at the start of a step, say).
  void reset_communication_ledger();

  /// Replaces `tensor` on every rank by the element-wise `op` of all ranks' tensors.
  std::shared_ptr<Work> all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  /// Copies rank `root`'s `tensor` into every other rank's `tensor`.
  std::shared_ptr<Work> broadcast_async(const Tensor& tensor, int root);
  /// Concatenates every rank's `input` along dimension 0 into `output`, rank 0's first, on every
  /// rank (torch's all_gather_into_tensor). output: (size() * input.size(0), ...).
  std::shared_ptr<Work> all_gather_async(const Tensor& output, const Tensor& input);
  /// Reduces every rank's `input` with `op` and leaves rank r the r-th of size() equal slices
  /// along dimension 0 (torch's reduce_scatter_tensor). input: (size() * output.size(0), ...).
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum);
  /// Finishes once every rank has started its barrier.
  std::shared_ptr<Work> barrier_async();

  /// all_reduce_async, then wait.
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) { all_reduce_async(tensor, op)->wait(); }
  /// broadcast_async, then wait.
  void broadcast(const Tensor& tensor, int root) { broadcast_async(tensor, root)->wait(); }
  /// all_gather_async, then wait.
  void all_gather(const Tensor& output, const Tensor& input) { all_gather_async(output, input)->wait(); }
  /// reduce_scatter_async, then wait.
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_async(output, input, op)->wait();
  }
  /// barrier_async, then wait.
  void barrier() { barrier_async()->wait(); }

 protected:
  /// A group in which this process is `rank` of `size`, with the settings `options` resolves
  /// to. The group is the process's n-th (counting from 0), which is its id for the watchdogs:
  /// every rank creates its groups in the same order.
  ProcessGroup(int rank, int size, const ProcessGroupOptions& options);
  /// Finishes setting the group up once its collectives work: checks that every rank could
  /// resolve its timeout and debug level and resolved the same ones (a rank comparing
  /// fingerprints alone would pair its checks with the others' collectives), then starts the
  /// watchdog with `hooks`. A problem on any rank is an AgreedError on every rank, so that all
  /// of them leave the job cleanly. The backend's factory calls it; collective.
  void start_watchdog(WatchdogHooks hooks);
  /// Stops the watchdog: a backend calls it first in its destructor if its hooks use what the
  /// destructor tears down.
  void stop_watchdog();
  /// Where the group's own small messages (fingerprints, settings) travel: the device the
  /// backend moves tensors on.
  virtual Device message_device() const { return Device::cpu(); }
  // What a backend implements: the same collectives, arguments already checked.
  /// Starts an all-reduce of a checked tensor.
  virtual std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  /// Starts a broadcast of a checked tensor from a valid root.
  virtual std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) = 0;
  /// Starts an all-gather of checked tensors.
  virtual std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) = 0;
  /// Starts a reduce-scatter of checked tensors.
  virtual std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) = 0;
  /// Starts a barrier.
  virtual std::shared_ptr<Work> start_barrier() = 0;

 private:
  // The common path of every collective: number it, compare fingerprints in DETAIL mode,
  // count the version change, start it through the backend, and hand it to the watchdog.
  std::shared_ptr<Work> run(CollectiveInfo info, const Tensor& written,
                            const std::function<std::shared_ptr<Work>()>& start);
  // Gathers `size` bytes from every rank (rank 0's first), outside the numbered collectives.
  std::vector<uint8_t> gather_bytes(const void* data, size_t size, const std::string& caller);
  // DETAIL mode: every rank's fingerprint of the collective about to start; the first one
  // that differs from rank 0's is an error on every rank.
  void compare_fingerprints(const CollectiveInfo& info);

  int rank_;
  int size_;
  uint64_t id_;
  double timeout_ = 0.0;
  DistributedDebug debug_ = DistributedDebug::off;
  // Why this rank could not resolve its settings (an invalid $LOCKSTEP_COLLECTIVE_TIMEOUT, say),
  // or empty: told to every rank by start_watchdog.
  std::string settings_problem_;
  uint64_t seq_ = 0;
  std::unique_ptr<Watchdog> watchdog_;
  mutable std::mutex ledger_mutex_;
  CommunicationLedger ledger_;
};

}  // namespace lockstep
