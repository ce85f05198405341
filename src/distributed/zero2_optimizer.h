/// \file
/// Zero2Optimizer: the optimiser side of ZeRO stage 2 (DeepSpeed's stage 2, FSDP's
/// SHARD_GRAD_OP). DistributedDataParallel with shard_gradients(true) leaves each rank, after
/// backward, only its shard of every bucket's averaged gradients; this optimiser keeps the
/// matching shard of the parameters as f32 master shards, steps those with an ordinary
/// optimiser (whose state is therefore a shard too), and all-gathers each bucket's updated
/// shards back into every rank's full parameters. Per rank, with Ψ f32 parameters, N ranks and K
/// bytes of optimiser state per parameter: 4Ψ for the parameters, the one whole copy; 4Ψ/N for
/// the gradient shards; KΨ/N for the optimiser state; and 4Ψ/N for the master shards, a copy of
/// the parameters' shard that a flat parameter buffer (FSDP's) would make a view.
///
///     auto ddp = std::make_shared<DistributedDataParallel>(model, DistributedDataParallelOptions().shard_gradients(true));
///     Zero2Optimizer opt(*ddp, [](std::vector<Tensor> p) { return std::make_unique<Adam>(p, AdamOptions(1e-3)); });
///     opt.zero_grad();
///     loss.backward();   // each bucket reduce-scattered as it completes
///     opt.step();        // this rank's shards, then an all-gather per bucket
#pragma once

#include <memory>
#include <vector>

#include "distributed/distributed_data_parallel.h"
#include "distributed/zero_redundancy_optimizer.h"

namespace lockstep {

/// Steps the gradient shards of a DistributedDataParallel built with shard_gradients(true).
/// step() is a collective: every rank calls it after the same backward. It is not joinable
/// (PyTorch's ZeroRedundancyOptimizer is): under a Join, a rank that has run out of inputs does
/// not step, and the others would wait in its all-gathers, so every rank must take the same
/// number of steps.
class Zero2Optimizer {
 public:
  /// Takes this rank's shard of every bucket's parameters as master shards (f32, as the
  /// parameters) and builds, with `make_optimizer`, the optimiser over them. `ddp` must outlive
  /// it and have been built with shard_gradients(true).
  Zero2Optimizer(DistributedDataParallel& ddp, const OptimizerFactory& make_optimizer);

  /// Steps the master shards with the gradient shards of the last averaging backward, then
  /// all-gathers every bucket's updated shards into the parameters of every rank.
  void step();
  /// Forgets the gradients: the master shards' (set_to_none) and any the parameters hold from a
  /// backward that did not average (inside no_sync()).
  void zero_grad();

  /// The learning rate the next step() uses.
  double lr() const { return optimizer_->lr(); }
  /// Changes the learning rate; every rank must set the same.
  void set_lr(double lr) { optimizer_->set_lr(lr); }
  /// The optimiser over this rank's master shards (what a learning-rate scheduler drives).
  Optimizer& optimizer() { return *optimizer_; }
  /// This rank's master shards, one per bucket, in the order of DistributedDataParallel::buckets().
  const std::vector<Tensor>& master_shards() const { return masters_; }

 private:
  DistributedDataParallel& ddp_;
  ProcessGroup& group_;
  std::vector<GradientShard> shards_;   // the buckets' parameters and gradient shards
  std::vector<Tensor> masters_;         // this rank's shard of each bucket's parameters
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace lockstep
