/// \file
/// ZeroRedundancyOptimizer (torch.distributed.optim.ZeroRedundancyOptimizer), ZeRO stage 1:
/// the optimiser's state sharded across ranks. Under DDP every rank holds the same averaged
/// gradients and would take the same step; here each rank steps only its own partition of the
/// parameters, with an optimiser that keeps state for that partition alone (Adam's two
/// moments: 8 bytes per parameter, divided by the world size), and then every rank receives
/// the others' updated parameters by broadcast. The weights end bitwise as a plain optimiser
/// on every rank would leave them.
///
/// Typical use, with DDP averaging the gradients:
///
///     auto ddp = std::make_shared<DistributedDataParallel>(model);
///     ZeroRedundancyOptimizer opt(ddp->parameters(), default_process_group(),
///                                 [](std::vector<Tensor> p) { return std::make_unique<Adam>(p, AdamOptions(1e-3)); });
///     opt.zero_grad();
///     loss.backward();
///     opt.step();                       // this rank's partition, then a broadcast from every rank
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "optim/optimizer.h"

namespace lockstep {

/// Builds the optimiser a rank runs over its partition, from that partition's parameters
/// (PyTorch passes the class and its keyword arguments instead).
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor> params)>;

/// Which rank owns each parameter: PyTorch's greedy partition. Parameters are taken largest
/// first (by element count, ties in their order), each given to the rank holding the fewest
/// elements so far (ties to the lowest rank). Returns, for every parameter, its rank.
std::vector<int> partition_parameters(const std::vector<int64_t>& numels, int world_size);

/// ZeRO-1: each rank keeps the optimiser state of its partition of the parameters alone.
///
/// Every rank must construct it with the same parameters in the same order (a DDP model's
/// parameters()), and every rank owns at least one parameter. step() and
/// consolidate_state_dict() are collectives: every rank calls them, in the same order.
class ZeroRedundancyOptimizer {
 public:
  /// Partitions `params` over `group`'s ranks and builds, with `make_optimizer`, this rank's
  /// optimiser over its partition. The parameters must share one dtype and one device (they
  /// travel as one flat buffer per rank).
  ZeroRedundancyOptimizer(std::vector<Tensor> params, ProcessGroup& group, const OptimizerFactory& make_optimizer);

  /// Steps this rank's partition from its gradients (which the caller has averaged, as DDP
  /// does), then broadcasts each rank's updated partition to every rank.
  void step();
  /// Clears the gradient of every parameter, this rank's or not, as Optimizer::zero_grad.
  void zero_grad(bool set_to_none = true);

  /// The learning rate the next step() uses.
  double lr() const { return optimizer_->lr(); }
  /// Changes the learning rate of this rank's optimiser; every rank must set the same.
  void set_lr(double lr) { optimizer_->set_lr(lr); }
  /// This rank's optimiser, over its partition alone: what a learning-rate scheduler drives
  /// (PyTorch's scheduler drives the ZeroRedundancyOptimizer, whose groups are this one's).
  Optimizer& optimizer() { return *optimizer_; }

  /// All the parameters, in the order they were given.
  const std::vector<Tensor>& params() const { return params_; }
  /// The rank that owns parameter `param_index`.
  int rank_of(size_t param_index) const { return owner_.at(param_index); }
  /// The indices (into params()) of the parameters `rank` owns, in their order: rank
  /// group.rank()'s optimiser's parameter j is params()[partition(rank)[j]].
  const std::vector<size_t>& partition(int rank) const { return partitions_.at(static_cast<size_t>(rank)); }

  /// Gathers every rank's optimiser state on rank `to` (a collective), so that state_dict()
  /// can return the whole of it there, as torch's consolidate_state_dict(to).
  void consolidate_state_dict(int to = 0);
  /// The whole optimiser's state, as a plain optimiser over params() would return it (state
  /// indexed by the parameter's place in params(), its tensors copies on the CPU). Only on the rank the last
  /// consolidate_state_dict() gathered on, and only before the next step(): anything else is
  /// an error that says what to call.
  OptimizerStateDict state_dict() const;
  /// Loads a whole optimiser's state (from state_dict(), or from a plain optimiser over the same
  /// parameters): every rank keeps the entries of its partition. Checks as
  /// Optimizer::load_state_dict does, and that the state is of params().size() parameters.
  void load_state_dict(const OptimizerStateDict& state);

 private:
  ProcessGroup& group_;
  std::vector<Tensor> params_;
  std::vector<int> owner_;                 // owner_[i]: the rank of parameter i
  std::vector<std::vector<size_t>> partitions_;  // partitions_[r]: the parameters rank r owns
  std::unique_ptr<Optimizer> optimizer_;   // over this rank's partition
  int consolidated_on_ = -1;               // the rank state_dict() may be called on, or -1
  OptimizerStateDict consolidated_;        // the whole state, on that rank
};

}  // namespace lockstep
