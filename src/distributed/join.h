/// \file
/// Join (torch.distributed.algorithms.Join): training on uneven inputs without a hang.
///
/// When one rank runs out of batches before the others, it leaves the training loop while they
/// call the next forward and backward, whose collectives (the buckets' all-reduces, the buffer
/// broadcast) then wait forever for it. Inside a Join, a rank that has run out *joins*: until
/// every rank has, it "shadows" the others, starting the same collectives as one iteration of
/// theirs with nothing to contribute (zero gradients), so that they finish their batches. Then
/// every rank takes the model of the last rank to join, whose optimizer took every step.
///
///     {
///       Join join(ddp);                          // ddp: a DistributedDataParallel (shared_ptr or object)
///       for (const Batch& b : my_batches) {      // the ranks may have different numbers of batches
///         opt.zero_grad();
///         cross_entropy((*ddp)(b.x), b.y).backward();
///         opt.step();
///       }
///     }                                          // shadows until every rank is done (or join.finish())
///
/// The price, while a Join lives: one extra small all-reduce in each forward of the wrapper
/// (world-size integers), by which the ranks still training tell each other and the joined
/// ranks that one more iteration is coming, and whether its backward averages.
///
/// \see @ref chapter4_join "Chapter 4, section 11: uneven inputs", which introduces it.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "distributed/process_group.h"

namespace lockstep {

class Join;

/// A Join's settings, set by chaining: `JoinOptions().throw_on_early_termination(true)`.
/// Defaults are PyTorch's. Every rank must pass the same ones.
class JoinOptions {
 public:
  /// Whether the Join does anything (default true). Off, it is as if there were none: a way to
  /// compare with and without it without changing the loop (PyTorch's `enable`).
  JoinOptions& enable(bool value) { enable_ = value; return *this; }
  /// Instead of shadowing, make every rank throw as soon as one runs out of inputs (default
  /// false): the ranks still training throw from their next forward, the ones that ran out from
  /// the Join's end, all naming the ranks that ran out. For a job whose last steps must not be
  /// taken with fewer ranks, or a model that runs collectives of its own (SyncBatchNorm), which
  /// a joined rank cannot shadow.
  JoinOptions& throw_on_early_termination(bool value) { throw_ = value; return *this; }
  /// Divide the averaged gradients by the world size the job started with (default true, as
  /// PyTorch's DDP join hook), so that a joined rank counts as a zero gradient: with k of N
  /// ranks still training, each step takes k/N of the usual step. False divides by the number
  /// of ranks still training instead, so that their steps keep full size.
  JoinOptions& divide_by_initial_world_size(bool value) { divide_by_initial_ = value; return *this; }

  /// Whether the Join is on.
  bool enable() const { return enable_; }
  /// Whether running out of inputs throws on every rank.
  bool throw_on_early_termination() const { return throw_; }
  /// Whether gradients are divided by the initial world size.
  bool divide_by_initial_world_size() const { return divide_by_initial_; }

 private:
  bool enable_ = true;
  bool throw_ = false;
  bool divide_by_initial_ = true;
};

/// What every rank said in one iteration's all-reduce of a Join: for each rank, 0 if it has
/// joined (run out of inputs), otherwise the positive value its Joinable announced for the
/// iteration (DistributedDataParallel announces whether its backward will average).
struct JoinRound {
  std::vector<int64_t> announced;  ///< one entry per rank of the group

  /// The ranks still training, in increasing order.
  std::vector<int> active_ranks() const;
  /// The ranks that have joined, in increasing order.
  std::vector<int> joined_ranks() const;
  /// How many ranks are still training.
  int num_active() const;
  /// The lowest rank still training, or -1 if none is.
  int first_active() const;
};

/// Something whose collectives a Join can shadow (torch's Joinable):
/// lockstep::DistributedDataParallel. Its forward calls notify_join() first while it is in a
/// Join; on a rank that has joined, the Join calls join_shadow() once per iteration of the
/// others, and join_finish() once every rank has joined.
class Joinable {
 public:
  virtual ~Joinable();
  Joinable() = default;
  Joinable(const Joinable&) = delete;             ///< A Join holds on to it by address.
  Joinable& operator=(const Joinable&) = delete;  ///< A Join holds on to it by address.

  /// The Join this object is in now, or nullptr.
  const Join* active_join() const { return join_; }

 protected:
  friend class Join;
  /// On a rank still training, inside a Join: one all-reduce in which every rank says whether it
  /// is still training (this rank announces `announce`, which must be positive). Returns every
  /// rank's answer; with throw_on_early_termination, throws if a rank has joined.
  /// Collective (the joined ranks answer from their Join's end).
  JoinRound notify_join(int64_t announce);
  /// On a rank that has joined: start the collectives of one iteration of the ranks still
  /// training, as they announced it in `round`, contributing nothing (PyTorch's
  /// JoinHook.main_hook).
  virtual void join_shadow(const JoinRound& round) = 0;
  /// On every rank once all have joined: make every rank's state rank `source`'s, the lowest of
  /// the ranks that joined last (whose optimizer took every step) (PyTorch's JoinHook.post_hook).
  virtual void join_finish(int source) = 0;
  /// The group whose ranks join.
  virtual ProcessGroup& join_process_group() = 0;
  /// Where the Join's own messages go (NCCL moves GPU tensors only).
  virtual Device join_device() const = 0;

 private:
  Join* join_ = nullptr;
};

/// The Join context (torch.distributed.algorithms.Join): while it lives, ranks may run out of
/// inputs at different times; at its end (finish(), or the destructor) each rank shadows the
/// others until every rank is done, then every rank takes the model of the last to finish. See
/// the file comment for the loop.
///
/// It makes the models equal, not the optimizers: a rank that ran out early keeps, say, the
/// momentum of its own last step, so training on after the Join would let the ranks drift
/// apart (as in PyTorch). Use a Join where training ends, or keep the inputs even.
///
/// Differences from PyTorch: one Joinable per Join (PyTorch takes a list, for DDP beside a
/// ZeroRedundancyOptimizer; Lockstep has only DDP); the ranks still training name themselves in
/// the per-forward all-reduce, so throw_on_early_termination needs no second all-reduce and its
/// error names the ranks that ran out; buffers come from the lowest rank still training and the
/// final model from the lowest of the last to join (PyTorch takes the highest), so that with
/// even inputs a Join changes nothing, rank 0 staying the source as without one.
class Join {
 public:
  /// Enters the Join: from now on each forward of `joinable` first all-reduces who is still
  /// training. Every rank of the joinable's group creates its Join at the same point, before
  /// the first forward inside it, with the same options. A joinable is in one Join at a time.
  explicit Join(Joinable& joinable, const JoinOptions& options = JoinOptions());
  /// The same for a joinable held by a shared_ptr: `Join join(ddp)`.
  template <class T>
  explicit Join(const std::shared_ptr<T>& joinable, const JoinOptions& options = JoinOptions())
      : Join(*joinable, options) {}
  /// Calls finish() if it was not called, unless an exception is passing (then it only leaves
  /// the Join: the other ranks' wait ends with the job, see lockstep::abort_job). It can throw,
  /// with throw_on_early_termination, like Python's `__exit__`; call finish() to handle that
  /// error where you choose.
  ~Join() noexcept(false);
  Join(const Join&) = delete;             ///< One Join, one end.
  Join& operator=(const Join&) = delete;  ///< One Join, one end.

  /// This rank has run out of inputs: shadow the ranks still training until none is, then
  /// make every rank's model that of the lowest rank among the last to finish. Afterwards the
  /// forwards of the joinable are plain again. Collective; a second call does nothing.
  void finish();

  /// The options it was created with.
  const JoinOptions& options() const { return options_; }
  /// How many iterations of other ranks this rank shadowed in finish() (0 before it).
  int64_t shadowed_iterations() const { return shadowed_; }
  /// How many forwards this rank ran inside the Join.
  int64_t forwards() const { return forwards_; }

 private:
  friend class Joinable;
  // Every rank's `mine` (0: joined), through one all-reduce named "Join: count active ranks".
  JoinRound exchange(int64_t mine);
  // A forward on a rank still training (Joinable::notify_join).
  JoinRound notify(int64_t announce);
  // Leaves the joinable: its forwards stop notifying.
  void detach();

  Joinable* joinable_;
  JoinOptions options_;
  int uncaught_at_start_;       // exceptions in flight when the Join began
  bool finished_ = false;
  int64_t forwards_ = 0;
  int64_t shadowed_ = 0;
  std::vector<int> last_active_;  // the ranks training in the last iteration seen
};

}  // namespace lockstep
