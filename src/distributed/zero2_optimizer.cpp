#include "distributed/zero2_optimizer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/flat_shard.h"
#include "distributed/work.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/zero_grad.h"
#include "util/trace.h"

namespace lockstep {

Zero2Optimizer::Zero2Optimizer(DistributedDataParallel& ddp, const OptimizerFactory& make_optimizer)
    : ddp_(ddp), group_(ddp.process_group()), shards_(ddp.gradient_shards()) {
  NoGradGuard no_grad;
  std::vector<Tensor> views;
  for (const GradientShard& bucket : shards_) {
    // This rank's shard of the bucket is [begin, end) of the parameters laid end to end.
    const int64_t size = shard_numel(bucket.numel, group_.size());
    const int64_t begin = group_.rank() * size, end = begin + size;
    std::vector<Part> parts;
    int64_t offset = 0;
    for (const Tensor& p : bucket.params) {
      const int64_t from = std::max(begin, offset), to = std::min(end, offset + p.numel());
      if (from < to) {
        // A leaf of its own that shares the parameter's memory: stepping it steps the parameter.
        const Tensor view = p.detach().reshape({p.numel()}).slice(0, from - offset, to - offset).requires_grad_();
        parts.push_back({view, from - begin});
        views.push_back(view);
      }
      offset += p.numel();
    }
    parts_.push_back(std::move(parts));
  }
  optimizer_ = make_optimizer(views);
  LOCKSTEP_CHECK(optimizer_ != nullptr, "Zero2Optimizer: the optimizer factory returned no optimizer");
}

std::vector<Tensor> Zero2Optimizer::parts() const {
  std::vector<Tensor> views;
  for (const auto& bucket : parts_) {
    for (const Part& part : bucket) views.push_back(part.view);
  }
  return views;
}

void Zero2Optimizer::step() {
  const RecordFunction span("Zero2Optimizer.step", "optim");
  // The gradient of each part is its stretch of the bucket's shard of the averaged gradients.
  for (size_t b = 0; b < shards_.size(); ++b) {
    for (const Part& part : parts_[b]) {
      part.view.set_grad(shards_[b].shard.slice(0, part.in_shard, part.in_shard + part.view.numel()));
    }
  }
  optimizer_->step();
  // Every rank's updated shard gathered into every rank's parameters: this rank's parts copied
  // into one flat shard per bucket (padding zero), every bucket's all-gather started, then each
  // bucket's whole copied out as it arrives.
  NoGradGuard no_grad;
  const MemoryCategoryGuard category(MemoryCategory::communication_buffers);
  std::vector<Tensor> shards, wholes;  // each collective's tensors, alive until it has finished
  std::vector<std::shared_ptr<Work>> works;
  for (size_t b = 0; b < shards_.size(); ++b) {
    const Tensor mine = zeros_like(shards_[b].shard);
    for (const Part& part : parts_[b]) mine.slice(0, part.in_shard, part.in_shard + part.view.numel()).copy_(part.view);
    shards.push_back(mine);
    wholes.push_back(empty({mine.numel() * group_.size()}, mine.options()));
    const CollectiveCaller caller("ZeRO-2: all-gather bucket " + std::to_string(b));
    works.push_back(group_.all_gather_async(wholes.back(), mine));
  }
  for (size_t b = 0; b < shards_.size(); ++b) {
    works[b]->wait();
    int64_t offset = 0;
    for (const Tensor& p : shards_[b].params) {
      p.copy_(wholes[b].slice(0, offset, offset + p.numel()).view(p.shape()));
      offset += p.numel();
    }
    shards[b] = wholes[b] = Tensor();  // free each bucket's buffers as soon as it is copied
  }
}

void Zero2Optimizer::zero_grad() {
  lockstep::zero_grad(parts(), /*set_to_none=*/true);
  lockstep::zero_grad(ddp_.parameters(), /*set_to_none=*/true);
}

}  // namespace lockstep
