#include "distributed/zero2_optimizer.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/flat_shard.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/zero_grad.h"
#include "tensor/ops/cat.h"
#include "util/trace.h"

namespace lockstep {
namespace {

// A bucket's parameters end to end: (numel,), in the order of their gradients in the bucket.
Tensor flatten(const std::vector<Tensor>& params) {
  std::vector<Tensor> pieces;
  for (const Tensor& p : params) pieces.push_back(p.detach().reshape({p.numel()}));
  return cat(pieces, 0);
}

}  // namespace

Zero2Optimizer::Zero2Optimizer(DistributedDataParallel& ddp, const OptimizerFactory& make_optimizer)
    : ddp_(ddp), group_(ddp.process_group()), shards_(ddp.gradient_shards()) {
  NoGradGuard no_grad;
  // This rank's shard of each bucket's parameters, a leaf the optimiser owns.
  for (const GradientShard& bucket : shards_) {
    masters_.push_back(shard_of(flatten(bucket.params), group_.rank(), group_.size()).requires_grad_());
    masters_.back().storage()->set_category(MemoryCategory::parameters);  // the f32 master shard
  }
  optimizer_ = make_optimizer(masters_);
  LOCKSTEP_CHECK(optimizer_ != nullptr, "Zero2Optimizer: the optimizer factory returned no optimizer");
}

void Zero2Optimizer::step() {
  const RecordFunction span("Zero2Optimizer.step", "optim");
  // The gradient of each master shard is the bucket's shard of the averaged gradients.
  for (size_t b = 0; b < shards_.size(); ++b) masters_[b].set_grad(shards_[b].shard);
  optimizer_->step();
  // Every rank's updated shards gathered into every rank's parameters, bucket by bucket.
  NoGradGuard no_grad;
  const MemoryCategoryGuard category(MemoryCategory::communication_buffers);
  for (size_t b = 0; b < shards_.size(); ++b) {
    const CollectiveCaller caller("ZeRO-2: all-gather bucket " + std::to_string(b));
    const Tensor whole = all_gather_shards(group_, masters_[b].detach(), shards_[b].numel);
    int64_t offset = 0;
    for (const Tensor& p : shards_[b].params) {
      p.copy_(whole.slice(0, offset, offset + p.numel()).view(p.shape()));
      offset += p.numel();
    }
  }
}

void Zero2Optimizer::zero_grad() {
  lockstep::zero_grad(masters_, /*set_to_none=*/true);
  lockstep::zero_grad(ddp_.parameters(), /*set_to_none=*/true);
}

}  // namespace lockstep
