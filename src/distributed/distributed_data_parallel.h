/// \file
/// DistributedDataParallel (torch.nn.parallel.DistributedDataParallel): one process per rank,
/// each with a full copy of the model and its own shard of every batch; gradients averaged
/// across ranks during backward, so every rank's optimizer takes the same step and the copies
/// stay identical ("in lockstep") without ever sending the weights again.
///
/// Typical use, after init_process_group:
///
///     auto ddp = std::make_shared<DistributedDataParallel>(model);   // broadcasts rank 0's weights
///     SGD opt(ddp->parameters(), SGDOptions(0.05));
///     Tensor loss = cross_entropy((*ddp)(x), y);                     // x: this rank's batch
///     opt.zero_grad();
///     loss.backward();                                               // gradients averaged here
///     opt.step();
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/init_process_group.h"
#include "distributed/join.h"
#include "distributed/reducer.h"
#include "nn/module.h"

namespace lockstep {

/// DistributedDataParallel's settings, PyTorch's defaults.
class DistributedDataParallelOptions {
 public:
  /// Broadcast rank 0's buffers (BatchNorm's running statistics) at the start of every forward,
  /// so that every rank evaluates with the same ones (default true).
  DistributedDataParallelOptions& broadcast_buffers(bool value) { broadcast_buffers_ = value; return *this; }
  /// Allow parameters that receive no gradient in a backward pass: they are found at the end of
  /// it (PyTorch finds them from the forward's graph), and each contributes the gradient it
  /// already holds, or zeros if it has none, as in PyTorch (default false: such a model is a
  /// clear error instead).
  DistributedDataParallelOptions& find_unused_parameters(bool value) { find_unused_ = value; return *this; }
  /// The cap of every bucket after the first, in MiB (default 25).
  DistributedDataParallelOptions& bucket_cap_mb(double value) { bucket_cap_mb_ = value; return *this; }
  /// The cap of the first bucket, in MiB (default 1: a small bucket starts communication early).
  DistributedDataParallelOptions& first_bucket_cap_mb(double value) { first_bucket_cap_mb_ = value; return *this; }
  /// Make each `param.grad()` a view of its slot in the bucket, as PyTorch's option of that name
  /// (default false). The averages are then not copied back after the all-reduce, and with
  /// `zero_grad(false)` backward accumulates straight into the bucket, so nothing is copied in
  /// either. The cost: a gradient tensor kept from one step is overwritten by the next.
  DistributedDataParallelOptions& gradient_as_bucket_view(bool value) { grad_as_view_ = value; return *this; }
  /// The communication hook, PyTorch's `ddp.register_comm_hook(None, fp16_compress_hook)` or
  /// `bf16_compress_hook` (default CommHook::none: buckets travel in their own dtype). A
  /// compression hook sends every bucket in 16 bits, halving the bytes of each all-reduce, for
  /// gradients rounded to 16 bits; with f16, a gradient whose average exceeds 65504 arrives as
  /// inf (see CommHook). Every rank must pass the same hook.
  DistributedDataParallelOptions& comm_hook(CommHook value) { comm_hook_ = value; return *this; }
  /// ZeRO-2 (DeepSpeed's stage 2, FSDP's SHARD_GRAD_OP): each bucket is reduce-scattered
  /// instead of all-reduced, so that each rank receives the averaged gradients of its shard of
  /// the bucket alone, and no rank keeps a whole gradient (param.grad() is released once in its
  /// bucket). Zero2Optimizer steps the shards (default false). Every rank must pass the same.
  DistributedDataParallelOptions& shard_gradients(bool value) { shard_gradients_ = value; return *this; }
  /// Whether buffers are broadcast every forward.
  bool broadcast_buffers() const { return broadcast_buffers_; }
  /// Whether unused parameters are allowed.
  bool find_unused_parameters() const { return find_unused_; }
  /// The bucket cap in MiB.
  double bucket_cap_mb() const { return bucket_cap_mb_; }
  /// The first bucket's cap in MiB.
  double first_bucket_cap_mb() const { return first_bucket_cap_mb_; }
  /// Whether gradients are views of the buckets.
  bool gradient_as_bucket_view() const { return grad_as_view_; }
  /// The communication hook.
  CommHook comm_hook() const { return comm_hook_; }
  /// Whether gradients are sharded (ZeRO-2).
  bool shard_gradients() const { return shard_gradients_; }

 private:
  bool broadcast_buffers_ = true;
  bool find_unused_ = false;
  // The Reducer's defaults, which are PyTorch's, in MiB.
  double bucket_cap_mb_ = static_cast<double>(ReducerOptions().bucket_bytes()) / (1 << 20);
  double first_bucket_cap_mb_ = static_cast<double>(ReducerOptions().first_bucket_bytes()) / (1 << 20);
  bool grad_as_view_ = false;
  CommHook comm_hook_ = CommHook::none;
  bool shard_gradients_ = false;
};

/// Wraps `module` so that its gradients are averaged across the ranks of a process group. The
/// wrapped module is registered as the child "module": the wrapper's state_dict keys start with
/// "module." (save `ddp.module().state_dict()` to get the plain names).
///
/// It is a Joinable: inside a lockstep::Join, ranks may have different numbers of batches (see
/// join.h). There every forward first all-reduces which ranks are still training; a rank that
/// has run out shadows each iteration of the others with the buffer broadcast and, if that
/// iteration's backward averages, every bucket's all-reduce with zero gradients (and the
/// all-reduce of find_unused_parameters), as PyTorch's DDP join hook does. Within an iteration
/// every rank still training must run the same kind of forward (averaging or not), and each
/// averaging forward must be followed by its backward before the next forward, or the
/// joined ranks cannot tell what to shadow. A model whose own layers run collectives
/// (SyncBatchNorm) cannot be shadowed: use JoinOptions::throw_on_early_termination there.
///
/// \see @ref chapter4 "Chapter 4: DistributedDataParallel", which introduces it.
class DistributedDataParallel : public Module, public Joinable {
 public:
  /// Sets up the buckets, then checks that every rank's module has parameters of the same
  /// number, order, shapes and dtypes, that every rank chose the same communication hook and
  /// built the same buckets (count, and each bucket's bytes, elements, dtype and device), with a
  /// clear error naming the first that differs. Then it copies rank 0's parameters and buffers
  /// to every rank. Collective: every rank of `group` calls it.
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   const DistributedDataParallelOptions& options = DistributedDataParallelOptions(),
                                   ProcessGroup& group = default_process_group());

  /// Broadcasts the buffers (if asked to), then runs the wrapped module. A forward that records
  /// a graph outside no_sync() makes the next backward average the gradients. Other forwards
  /// (inside no_sync(), under NoGradGuard) change nothing, and a backward that no such forward
  /// prepared (one through `ddp.module()` alone, say) stays local, as in PyTorch. Inside a Join
  /// it first tells the other ranks that this one is still training (one small all-reduce), and
  /// the buffers come from the lowest rank still training, rank 0 until it runs out.
  Tensor forward(const Tensor& input) override;

  /// Makes every rank's buffers (BatchNorm's running statistics) rank 0's, as forward() does
  /// first when broadcast_buffers is on (PyTorch's `_sync_buffers`). After the last training
  /// step each rank's buffers hold its own batch's update: call it before evaluating or saving.
  /// Collective: every rank of the group calls it.
  void sync_buffers();

  /// The wrapped module (PyTorch's `ddp.module`).
  Module& module() { return *module_; }
  /// The group the gradients are averaged over (PyTorch's `ddp.process_group`).
  ProcessGroup& process_group() { return group_; }

  /// The buckets, in the order their all-reduces start in every backward.
  std::vector<BucketSummary> buckets() const { return reducer_->buckets(); }
  /// With shard_gradients: each bucket's parameters and this rank's shard of their averaged
  /// gradients (see Reducer::gradient_shards).
  std::vector<GradientShard> gradient_shards() const { return reducer_->gradient_shards(); }

  /// While a guard from no_sync() lives, forwards leave their backward passes local: the
  /// gradients accumulate in param.grad() on each rank without communication. The first
  /// backward of a forward run after it averages the accumulated gradients. (Gradient
  /// accumulation over micro-batches with one all-reduce per step.)
  class NoSyncGuard {
   public:
    /// Ends the no_sync() region.
    ~NoSyncGuard() { ddp_.require_sync_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;             ///< One guard per region.
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;  ///< One guard per region.

   private:
    friend class DistributedDataParallel;
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.require_sync_) {
      ddp.require_sync_ = false;
    }
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  /// `{ auto guard = ddp.no_sync(); ... }`: see NoSyncGuard.
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

 protected:
  /// Join: the collectives of one iteration of the ranks still training, on a rank that has run
  /// out of inputs: the buffer broadcast (if broadcast_buffers), and if that iteration's
  /// backward averages, every bucket's all-reduce with zeros (see Reducer::shadow_backward).
  void join_shadow(const JoinRound& round) override;
  /// Join: every rank takes rank `source`'s parameters, and its buffers if broadcast_buffers
  /// (PyTorch's `_sync_final_model`): a rank that joined early missed the last steps.
  void join_finish(int source) override;
  /// Join: the group the gradients are averaged over.
  ProcessGroup& join_process_group() override { return group_; }
  /// Join: the device of the module's parameters.
  Device join_device() const override;

 private:
  // Makes every rank's buffers rank `source`'s.
  void sync_buffers_from(int source);
  // Inside a Join: every rank still training must announce the same kind of iteration.
  void check_same_iteration(const JoinRound& round) const;

  std::shared_ptr<Module> module_;
  ProcessGroup& group_;
  DistributedDataParallelOptions options_;
  std::unique_ptr<Reducer> reducer_;
  bool require_sync_ = true;
};

}  // namespace lockstep
