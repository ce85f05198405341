/// \file
/// The Reducer: the part of DistributedDataParallel that averages gradients across ranks while
/// backward is still running (torch's C++ `Reducer`), or, for ZeRO-2, reduce-scatters them so
/// that each rank keeps its shard alone.
///
/// Parameters are grouped into buckets, in reverse registration order, because backward
/// produces gradients roughly in that order: the last layer's first. A hook on each parameter
/// fires when its gradient has been accumulated; it copies the gradient into its bucket's flat
/// buffer, and once every gradient of a bucket is there, the bucket's all-reduce starts,
/// asynchronously, while backward goes on computing earlier layers. At the end of backward the
/// Reducer waits for the all-reduces and copies the averages back into `param.grad()` (or, with
/// gradient_as_bucket_view, makes `param.grad()` a view of them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"
#include "distributed/process_group.h"

namespace lockstep {

/// A DDP communication hook: the dtype a bucket's gradients travel in. These are the hooks of
/// PyTorch's torch.distributed.algorithms.ddp_comm_hooks.default_hooks, which PyTorch installs
/// with `ddp.register_comm_hook(state, hook)` and Lockstep chooses with
/// DistributedDataParallelOptions::comm_hook. A compression hook casts the bucket, already
/// divided by the world size, to 16 bits, all-reduces (sums) that, and casts the result back
/// into the bucket: half the bytes on the wire, for gradients rounded to 16 bits. Every rank
/// must choose the same hook.
///
/// What survives the trip: the values are rounded to 16 bits when cast and at each addition of
/// the all-reduce, so an averaged gradient is off by at most about world-size units of roundoff
/// (2^-11 relative for f16, 2^-8 for bf16) of the mean of the ranks' magnitudes. An inf or NaN on
/// one rank stays inf or NaN in every rank's average, so GradScaler still finds it everywhere and
/// every rank skips the same step. f16 holds no finite value beyond 65504: where a rank's share
/// (gradient / world size) or a partial sum of the shares exceeds that, a gradient finite in f32
/// arrives as inf, and with GradScaler the step is skipped and the scale halved, on every rank
/// alike, until the scaled gradients fit in f16. bf16 has f32's range and does not overflow so.
enum class CommHook {
  none,           ///< send the bucket as it is (PyTorch's default allreduce_hook)
  fp16_compress,  ///< send it as f16 (fp16_compress_hook): 10-bit mantissa, finite up to 65504
  bf16_compress,  ///< send it as bf16 (bf16_compress_hook): 7-bit mantissa, f32's range
};

/// PyTorch's name of the hook: "allreduce_hook", "fp16_compress_hook" or "bf16_compress_hook".
std::string comm_hook_name(CommHook hook);

/// What one bucket holds (for printing, the constructor's check that every rank built the same
/// buckets, and tests).
struct BucketSummary {
  std::vector<std::string> names;  ///< its parameters' names, in the order their gradients land
  int64_t bytes = 0;               ///< the size of its flat buffer
  /// What each rank's all-reduce of it sends: `bytes`, or half of it (for f32 gradients) with a
  /// compression hook.
  int64_t comm_bytes = 0;
  int64_t numel = 0;               ///< the elements of its flat buffer
  DType dtype = DType::f32;        ///< its gradients' dtype
  Device device = Device::cpu();   ///< its gradients' device
};

/// How a Reducer buckets and hands back gradients, set by chaining:
/// `ReducerOptions().bucket_bytes(4 << 20).find_unused_parameters(true)`. Defaults are
/// PyTorch's; DistributedDataParallel fills them from its own options.
class ReducerOptions {
 public:
  /// The cap of the first bucket, in bytes (default 1 MiB: a small bucket starts
  /// communication early in backward).
  ReducerOptions& first_bucket_bytes(int64_t value) { first_bucket_bytes_ = value; return *this; }
  /// The cap of every later bucket, in bytes (default 25 MiB).
  ReducerOptions& bucket_bytes(int64_t value) { bucket_bytes_ = value; return *this; }
  /// Look for parameters that got no gradient (see DistributedDataParallelOptions; default false).
  ReducerOptions& find_unused_parameters(bool value) { find_unused_ = value; return *this; }
  /// Make each `param.grad()` a view of its bucket (see DistributedDataParallelOptions; default
  /// false).
  ReducerOptions& gradient_as_bucket_view(bool value) { grad_as_view_ = value; return *this; }
  /// The dtype buckets travel in (see CommHook; default CommHook::none).
  ReducerOptions& comm_hook(CommHook value) { comm_hook_ = value; return *this; }
  /// ZeRO-2: reduce-scatter each bucket instead of all-reducing it, so that each rank receives
  /// the average of its shard of the bucket alone (see Reducer::gradient_shards; default false).
  /// Does not combine with find_unused_parameters, gradient_as_bucket_view or a comm_hook.
  ReducerOptions& shard_gradients(bool value) { shard_gradients_ = value; return *this; }

  /// The first bucket's cap in bytes.
  int64_t first_bucket_bytes() const { return first_bucket_bytes_; }
  /// The later buckets' cap in bytes.
  int64_t bucket_bytes() const { return bucket_bytes_; }
  /// Whether unused parameters are looked for.
  bool find_unused_parameters() const { return find_unused_; }
  /// Whether gradients are views of the buckets.
  bool gradient_as_bucket_view() const { return grad_as_view_; }
  /// The communication hook.
  CommHook comm_hook() const { return comm_hook_; }
  /// Whether buckets are reduce-scattered into shards (ZeRO-2).
  bool shard_gradients() const { return shard_gradients_; }

 private:
  int64_t first_bucket_bytes_ = int64_t(1) << 20;
  int64_t bucket_bytes_ = int64_t(25) << 20;
  bool find_unused_ = false;
  bool grad_as_view_ = false;
  CommHook comm_hook_ = CommHook::none;
  bool shard_gradients_ = false;
};

/// One bucket's share of the gradients on this rank, when the Reducer shards them (ZeRO-2).
/// The bucket is its parameters' gradients laid end to end in `params`' order, padded with zeros
/// to a multiple of the world size; rank r receives the r-th of its equal shards
/// (flat_shard.h's layout).
struct GradientShard {
  std::vector<Tensor> params;  ///< the bucket's parameters, in the order of their gradients in it
  int64_t numel = 0;           ///< the elements of their gradients together, padding excluded
  Tensor shard;                ///< this rank's shard of the averaged gradients: (shard_numel(numel, world),)
};

/// Averages the gradients of `params` across the ranks of a group, bucket by bucket, overlapped
/// with backward. Created and driven by DistributedDataParallel.
///
/// \see @ref chapter4 "Chapter 4: DistributedDataParallel", which introduces it.
class Reducer {
 public:
  /// Buckets `params` (name, tensor) in reverse order: the first bucket closes once it holds
  /// `options.first_bucket_bytes()` or more, the others at `options.bucket_bytes()`;
  /// parameters of different dtypes or devices never share a bucket. Registers one
  /// post-accumulate-grad hook per parameter.
  Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& group,
          const ReducerOptions& options = ReducerOptions());
  /// Removes the hooks.
  ~Reducer();
  Reducer(const Reducer&) = delete;             ///< Owns hooks that point back at it.
  Reducer& operator=(const Reducer&) = delete;  ///< Owns hooks that point back at it.

  /// Called by every forward of the wrapper. First clears what a backward that failed half-way
  /// left behind (waiting for any all-reduce it started). Then, if `sync` (a forward that
  /// records a graph outside no_sync()), arms the next backward to average the gradients.
  /// Until then, and again after that backward, gradients only accumulate locally, as in
  /// PyTorch: a forward under NoGradGuard or inside no_sync() leaves the arming as it is, and a
  /// backward that no forward armed sends nothing. An armed backward divides the sums by
  /// `divisor` (0, the default: the group's size; a Join that divides by the ranks still
  /// training passes their number).
  void prepare_for_forward(bool sync, int divisor = 0);

  /// On a rank that has run out of inputs inside a Join: the collectives of one averaging
  /// backward of the other ranks, with zeros for this rank's gradients (PyTorch's
  /// `_match_all_reduce_for_bwd_pass` and `_match_unused_params_allreduce`): every bucket's
  /// all-reduce, in bucket order and in the dtype it travels in, then, with
  /// find_unused_parameters, the all-reduce that finds the parameters some rank used. The
  /// results are dropped: this rank's gradients and buckets stay as they are. Collective.
  void shadow_backward();

  /// The buckets, in the order their all-reduces are started.
  std::vector<BucketSummary> buckets() const;

  /// With ReducerOptions::shard_gradients: each bucket's parameters and this rank's shard of
  /// their averaged gradients, which every averaging backward overwrites. In that mode a
  /// parameter's gradient is released once it is in its bucket, and the bucket once it is sent,
  /// so that after backward a rank holds only its shards. Without it, an error.
  std::vector<GradientShard> gradient_shards() const;

 private:
  struct Bucket;
  // A hook: parameter `index` has its gradient for this backward.
  void mark_ready(size_t index);
  // Starts the all-reduce of every bucket that is complete, in bucket order.
  void launch_ready_buckets();
  // Runs at the end of backward: unused parameters, waiting, copying back.
  void finalize_backward();
  // Forgets which gradients arrived, after waiting for the all-reduces already started (their
  // buckets are about to be written again).
  void reset_marks();
  // The tensor of the all-reduce that counts which parameters any rank used: `used`, one
  // entry per parameter (1 if this rank used it), on the parameters' device.
  Tensor used_map(const std::vector<double>& used) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  ProcessGroup& group_;
  bool find_unused_;
  bool grad_as_view_;
  bool shard_gradients_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> slot_of_;  // parameter -> (bucket, position in bucket)
  std::vector<uint64_t> hooks_;
  std::vector<bool> ready_;         // parameter has its gradient in this backward
  size_t next_bucket_ = 0;          // the next bucket whose all-reduce may start
  bool sync_ = false;               // the next backward averages (a synchronised forward ran)
  int divisor_ = 1;                 // what the armed backward divides the sums by
  bool finalize_queued_ = false;    // finalize_backward is queued for this backward
};

}  // namespace lockstep
