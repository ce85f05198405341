/// \file
/// Zero2Optimizer: the optimiser side of ZeRO stage 2 (DeepSpeed's stage 2, FSDP's
/// SHARD_GRAD_OP). DistributedDataParallel with shard_gradients(true) leaves each rank, after
/// backward, only its shard of every bucket's averaged gradients; this optimiser steps the
/// matching elements of the parameters, in place, with an ordinary optimiser (whose state is
/// therefore a shard too), and all-gathers each bucket's updated shard back into every rank's
/// whole parameters. A bucket's shard may cut through parameters: the optimiser sees each
/// parameter's part inside this rank's shard as a 1-D view of it. Per rank, with Ψ f32
/// parameters, N ranks and K bytes of optimiser state per parameter: 4Ψ for the parameters, the
/// one whole copy; 4Ψ/N for the gradient shards; KΨ/N for the optimiser state: 4Ψ + (4+K)Ψ/N,
/// the ZeRO paper's formula.
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
  /// Finds, in every bucket, the parts of its parameters inside this rank's shard and builds,
  /// with `make_optimizer`, the optimiser over views of them. `ddp` must outlive it and have
  /// been built with shard_gradients(true).
  Zero2Optimizer(DistributedDataParallel& ddp, const OptimizerFactory& make_optimizer);

  /// Steps this rank's parts of the parameters with the gradient shards of the last averaging
  /// backward, then all-gathers every bucket's updated shard into the parameters of every rank.
  void step();
  /// Forgets the gradients: the parts' (set_to_none) and any the parameters hold from a backward
  /// that did not average (inside no_sync()).
  void zero_grad();

  /// The learning rate the next step() uses.
  double lr() const { return optimizer_->lr(); }
  /// Changes the learning rate; every rank must set the same.
  void set_lr(double lr) { optimizer_->set_lr(lr); }
  /// The optimiser over this rank's parts (what a learning-rate scheduler drives).
  Optimizer& optimizer() { return *optimizer_; }
  /// This rank's parts of the parameters, bucket after bucket: 1-D views of the parameters (the
  /// optimiser's parameters), at most one per parameter.
  std::vector<Tensor> parts() const;

 private:
  // A parameter's elements inside this rank's shard of its bucket.
  struct Part {
    Tensor view;        // (n,) view of the parameter: what the optimiser steps
    int64_t in_shard;   // where they lie in the bucket's shard, in elements
  };
  DistributedDataParallel& ddp_;
  ProcessGroup& group_;
  std::vector<GradientShard> shards_;      // the buckets' parameters and gradient shards
  std::vector<std::vector<Part>> parts_;   // per bucket, this rank's parts of its parameters
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace lockstep
