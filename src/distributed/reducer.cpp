#include "distributed/reducer.h"

#include <map>

#include "tensor/autograd/engine.h"
#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/flat_shard.h"
#include "util/trace.h"

namespace lockstep {

struct Reducer::Bucket {
  std::vector<size_t> members;   // parameter indices, in the order gradients are expected
  std::vector<int64_t> offsets;  // where each member's gradient starts in `flat`, in elements
  int64_t numel = 0;             // the members' elements together
  TensorOptions options;         // their dtype and device
  Tensor flat;                   // flat: (numel,) one dtype, one device; sharded: (padded,), only
                                 // from its first gradient of a backward until it is sent
  Tensor shard;                  // sharded: this rank's shard of the average, (padded / world,)
  Tensor compressed;             // flat in 16 bits, what a compression hook sends; else undefined
  size_t pending = 0;            // members still without a gradient in this backward
  std::shared_ptr<Work> work;    // the all-reduce, once started

  // What the all-reduce sends: the flat buffer itself, or its 16-bit copy.
  const Tensor& sent() const { return compressed.defined() ? compressed : flat; }
};

std::string comm_hook_name(CommHook hook) {
  switch (hook) {
    case CommHook::none: return "allreduce_hook";
    case CommHook::fp16_compress: return "fp16_compress_hook";
    case CommHook::bf16_compress: return "bf16_compress_hook";
  }
  return "an unknown hook";
}

namespace {
// The slice of a bucket's flat buffer that holds member `position`'s gradient, shaped like it.
Tensor slot(const Tensor& flat, int64_t offset, const Tensor& param) {
  return flat.slice(0, offset, offset + param.numel()).view(param.shape());
}

// Whether `grad` already is that slot (gradient_as_bucket_view, after zero_grad(false)).
bool is_slot(const Tensor& grad, const Tensor& slot) {
  return grad.storage() == slot.storage() && grad.offset() == slot.offset();
}
}  // namespace

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& group, const ReducerOptions& options)
    : params_(std::move(params)),
      group_(group),
      find_unused_(options.find_unused_parameters()),
      grad_as_view_(options.gradient_as_bucket_view()),
      shard_gradients_(options.shard_gradients()) {
  LOCKSTEP_CHECK(!shard_gradients_ || (!find_unused_ && !grad_as_view_ && options.comm_hook() == CommHook::none),
                 "DistributedDataParallel: shard_gradients (ZeRO-2) does not combine with find_unused_parameters, ",
                 "gradient_as_bucket_view or a comm_hook; leave those at their defaults");
  // Buckets, filled walking the parameters backwards (the order backward produces their
  //    gradients), one open bucket per (dtype, device). A bucket closes once it reaches its cap:
  //    the first one of each kind is small so that communication starts early in backward.
  struct Open {
    std::vector<size_t> members;
    int64_t bytes = 0;
    int closed = 0;
  };
  std::map<std::pair<int, std::string>, Open> open;
  std::vector<std::vector<size_t>> groups;
  for (size_t i = params_.size(); i-- > 0;) {
    const Tensor& p = params_[i].second;
    Open& bucket = open[{static_cast<int>(p.dtype()), p.device().str()}];
    bucket.members.push_back(i);
    bucket.bytes += p.nbytes();
    if (bucket.bytes >= (bucket.closed == 0 ? options.first_bucket_bytes() : options.bucket_bytes())) {
      groups.push_back(std::move(bucket.members));
      bucket = Open{{}, 0, bucket.closed + 1};
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.members.empty()) groups.push_back(std::move(bucket.members));
  }

  // Each bucket's flat buffer, and where each gradient goes in it.
  slot_of_.resize(params_.size());
  for (std::vector<size_t>& members : groups) {
    Bucket bucket;
    int64_t total = 0;
    for (size_t i : members) {
      slot_of_[i] = {buckets_.size(), bucket.offsets.size()};
      bucket.offsets.push_back(total);
      total += params_[i].second.numel();
    }
    const Tensor& first = params_[members.front()].second;
    bucket.numel = total;
    bucket.options = first.options();
    // A bucket is a communication buffer, unless the gradients live in it.
    const MemoryCategoryGuard category(grad_as_view_ ? MemoryCategory::gradients : MemoryCategory::communication_buffers);
    if (shard_gradients_) {
      // Padded to a multiple of the world size, allocated when its first gradient arrives.
      bucket.shard = zeros({shard_numel(total, group_.size())}, first.options());
      bucket.shard.storage()->set_category(MemoryCategory::gradients);  // ZeRO-2's gradient shard
    } else {
      bucket.flat = zeros({total}, first.options());
    }
    if (options.comm_hook() != CommHook::none) {
      const DType wire = options.comm_hook() == CommHook::fp16_compress ? DType::f16 : DType::bf16;
      bucket.compressed = zeros({total}, first.options().dtype(wire));
    }
    bucket.members = std::move(members);
    buckets_.push_back(std::move(bucket));
  }
  reset_marks();

  //! [hooks]
  // The hooks: backward calls them as each gradient is complete.
  for (size_t i = 0; i < params_.size(); ++i) {
    hooks_.push_back(params_[i].second.register_post_accumulate_grad_hook([this, i](const Tensor&) { mark_ready(i); }));
  }
  //! [hooks]
}

Reducer::~Reducer() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].second.remove_hook(hooks_[i]);
}

void Reducer::prepare_for_forward(bool sync, int divisor) {
  // A backward that failed half-way (an error in some other node) never reached
  // finalize_backward: let it average nothing more. It, or a finalize_backward that failed
  // (unused parameters), may have left marks and started all-reduces: start clean. (After a
  // backward that completed, the marks are clean already and this costs nothing.)
  if (finalize_queued_) sync_ = false;
  finalize_queued_ = false;
  reset_marks();
  if (sync) {
    sync_ = true;
    divisor_ = divisor > 0 ? divisor : group_.size();
  }
}

void Reducer::reset_marks() {
  ready_.assign(params_.size(), false);
  for (Bucket& bucket : buckets_) {
    if (bucket.work) bucket.work->wait();
    bucket.work.reset();
    bucket.pending = bucket.members.size();
  }
  next_bucket_ = 0;
}

std::vector<BucketSummary> Reducer::buckets() const {
  std::vector<BucketSummary> out;
  for (const Bucket& bucket : buckets_) {
    BucketSummary summary;
    for (size_t i : bucket.members) summary.names.push_back(params_[i].first);
    const int64_t element = static_cast<int64_t>(element_size(bucket.options.dtype()));
    summary.bytes = bucket.numel * element;
    // A reduce-scatter sends the padded bucket; a compression hook sends 16 bits per element.
    summary.comm_bytes = bucket.compressed.defined() ? bucket.compressed.nbytes()
                         : shard_gradients_           ? bucket.shard.numel() * group_.size() * element
                                                      : summary.bytes;
    summary.numel = bucket.numel;
    summary.dtype = bucket.options.dtype();
    summary.device = bucket.options.device();
    out.push_back(std::move(summary));
  }
  return out;
}

//! [bucket ready]
void Reducer::mark_ready(size_t index) {
  // Without a synchronised forward first (inside no_sync(), say) gradients just accumulate in
  // param.grad(), as without DDP.
  if (!sync_) return;
  // The first gradient of this backward: make sure the end of backward waits for the rest.
  if (!finalize_queued_) {
    queue_backward_callback([this] { finalize_backward(); });
    finalize_queued_ = true;
  }
  const auto [b, position] = slot_of_[index];
  Bucket& bucket = buckets_[b];
  const Tensor& param = params_[index].second;
  if (shard_gradients_ && !bucket.flat.defined()) {
    const MemoryCategoryGuard category(MemoryCategory::communication_buffers);
    bucket.flat = zeros({bucket.shard.numel() * group_.size()}, bucket.options);
  }
  const Tensor into = slot(bucket.flat, bucket.offsets[position], param);
  if (!is_slot(param.grad(), into)) into.copy_(param.grad());
  // ZeRO-2 keeps no whole gradient: the bucket holds it until its reduce-scatter is sent.
  if (shard_gradients_) param.set_grad(Tensor());
  ready_[index] = true;
  if (--bucket.pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  // Every rank must start the same all-reduces in the same order, or they pair up wrongly and
  // hang: a complete bucket waits until all buckets before it have started.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    const size_t index = next_bucket_++;
    Bucket& bucket = buckets_[index];
    // Divide, then sum: the average, without the sum of many ranks growing large first. (The
    // divisor is the world size, unless a Join divides by the ranks still training.)
    bucket.flat.mul_(1.0 / divisor_);
    // A compression hook rounds each share to 16 bits. (PyTorch's hooks cast first and divide
    // in 16 bits; dividing first rounds once fewer, and f16 overflows only where a share or a
    // partial sum of the shares does, not already where one rank's gradient does.) inf and NaN
    // stay inf and NaN.
    if (bucket.compressed.defined()) bucket.compressed.copy_(bucket.flat);
    const CollectiveCaller caller("DDP bucket " + std::to_string(index));
    bucket.work = shard_gradients_ ? group_.reduce_scatter_async(bucket.shard, bucket.flat, ReduceOp::Sum)
                                   : group_.all_reduce_async(bucket.sent(), ReduceOp::Sum);
  }
}
//! [bucket ready]

Tensor Reducer::used_map(const std::vector<double>& used) const {
  return from_vector(used, {static_cast<int64_t>(used.size())}, TensorOptions().device(params_.front().second.device()));
}

void Reducer::shadow_backward() {
  // The same collectives as launch_ready_buckets and finalize_backward start, in the same
  // order, under the same caller names: with DETAIL debugging the ranks compare each
  // collective's fingerprint, caller included, and a shadow must look like what it shadows.
  std::vector<Tensor> zero_buckets;
  std::vector<std::shared_ptr<Work>> works;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const CollectiveCaller caller("DDP bucket " + std::to_string(b));
    if (shard_gradients_) {
      const Tensor input = zeros({buckets_[b].shard.numel() * group_.size()}, buckets_[b].options);
      const Tensor output = zeros_like(buckets_[b].shard);
      zero_buckets.push_back(input);
      zero_buckets.push_back(output);
      works.push_back(group_.reduce_scatter_async(output, input, ReduceOp::Sum));
    } else {
      zero_buckets.push_back(zeros_like(buckets_[b].sent()));
      works.push_back(group_.all_reduce_async(zero_buckets.back(), ReduceOp::Sum));
    }
  }
  if (find_unused_) {
    // Nothing used here: a 0 for every parameter.
    const CollectiveCaller caller("DDP: find unused parameters");
    group_.all_reduce(used_map(std::vector<double>(params_.size(), 0.0)), ReduceOp::Sum);
  }
  const RecordFunction span("Join: wait for the shadow all-reduces", "ddp");
  for (const auto& work : works) work->wait();
}

void Reducer::finalize_backward() {
  finalize_queued_ = false;
  // This backward is the one the last synchronised forward prepared; the next needs another.
  sync_ = false;
  // Parameters that got no gradient were not used by this forward. Without
  //    find_unused_parameters their buckets would never be complete: say which they are.
  std::vector<size_t> unused;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) unused.push_back(i);
  }
  if (!unused.empty() && !find_unused_) {
    std::string names;
    for (size_t i : unused) names += (names.empty() ? "" : ", ") + params_[i].first;
    LOCKSTEP_FAIL(
        "DistributedDataParallel: ", unused.size(), " parameter(s) received no gradient in this backward pass: ", names,
        ". Every rank must average every parameter's gradient, so the all-reduce of their bucket could never start. "
        "If the model really skips them, pass find_unused_parameters(true); otherwise make the loss depend on them");
  }
  // With find_unused_parameters: which parameters did any rank use? A parameter this rank
  //    did not use contributes the gradient it already holds (accumulated inside no_sync(),
  //    say), or zeros if it has none, as in PyTorch; one that no rank used keeps its gradient
  //    as it was.
  std::vector<int64_t> used_anywhere(params_.size(), 1);
  if (find_unused_) {
    std::vector<double> mine(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) mine[i] = ready_[i] ? 1.0 : 0.0;
    for (size_t i : unused) {
      const auto [b, position] = slot_of_[i];
      const Tensor& param = params_[i].second;
      const Tensor into = slot(buckets_[b].flat, buckets_[b].offsets[position], param);
      if (param.grad().defined() && is_slot(param.grad(), into)) {
        // A gradient that is a view of the bucket must not change with it if no rank used it.
        param.set_grad(param.grad().clone());
      } else if (param.grad().defined()) {
        into.copy_(param.grad());
      } else {
        into.zero_();
      }
      ready_[i] = true;
      --buckets_[b].pending;
    }
    launch_ready_buckets();
    const Tensor used = used_map(mine);
    {
      const CollectiveCaller caller("DDP: find unused parameters");
      group_.all_reduce(used, ReduceOp::Sum);
    }
    const std::vector<double> total = used.to(Device::cpu()).to_vector<double>();
    for (size_t i = 0; i < params_.size(); ++i) used_anywhere[i] = total[i] > 0.0;
  }
  // Wait for every bucket, then hand the averages to param.grad(). A finished all-reduce is
  //    forgotten at once, so that reset_marks() below has nothing left to wait for.
  for (Bucket& bucket : buckets_) {
    {
      const RecordFunction span("DDP: wait for the bucket's all-reduce", "ddp");
      bucket.work->wait();
    }
    bucket.work.reset();
    if (shard_gradients_) {
      // This rank's shard is in bucket.shard; the whole bucket is no longer needed.
      bucket.flat = Tensor();
      continue;
    }
    if (bucket.compressed.defined()) bucket.flat.copy_(bucket.compressed);  // exact: 16 bits fit in f32
    const RecordFunction span("DDP: copy averages into grad", "ddp");
    for (size_t position = 0; position < bucket.members.size(); ++position) {
      const size_t i = bucket.members[position];
      if (!used_anywhere[i]) continue;
      const Tensor& param = params_[i].second;
      const Tensor average = slot(bucket.flat, bucket.offsets[position], param);
      if (grad_as_view_) {
        param.set_grad(average);  // from now on the gradient lives in the bucket: no copy
      } else if (param.grad().defined()) {
        param.grad().copy_(average);
      } else {
        param.set_grad(average.clone());
        param.grad().storage()->set_category(MemoryCategory::gradients);
      }
    }
  }
  reset_marks();
}

std::vector<GradientShard> Reducer::gradient_shards() const {
  LOCKSTEP_CHECK(shard_gradients_, "DistributedDataParallel: gradient shards exist only with shard_gradients(true) (ZeRO-2)");
  std::vector<GradientShard> out;
  for (const Bucket& bucket : buckets_) {
    GradientShard shard;
    for (size_t i : bucket.members) shard.params.push_back(params_[i].second);
    shard.numel = bucket.numel;
    shard.shard = bucket.shard;
    out.push_back(std::move(shard));
  }
  return out;
}

}  // namespace lockstep
