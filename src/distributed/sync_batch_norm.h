/// \file
/// SyncBatchNorm (torch.nn.SyncBatchNorm): batch normalisation whose statistics are those of
/// the whole global batch, every rank's images together, and convert_sync_batchnorm, which
/// swaps it in for every BatchNorm2d of a model.
///
/// Why: under DistributedDataParallel each rank sees only its own B images, so plain
/// BatchNorm2d normalises with the statistics of B images, not of the B x world the step
/// trains on. With small per-rank batches (detection, segmentation, big images) those
/// statistics are noisy, and training differs from one process with the whole batch.
/// SyncBatchNorm all-gathers the ranks' per-channel (mean, variance, count) in forward and
/// all-reduces the backward's per-channel sums, so that N ranks compute exactly what one
/// process would on the concatenated batch (tensor/ops/batch_norm.h, sync_batch_norm).
///
///     auto model = convert_sync_batchnorm(make_model("resnet"));
///     DistributedDataParallel ddp(model);   // then train as usual
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "nn/batch_norm.h"
#include "nn/module.h"

namespace lockstep {

/// Batch normalisation over (N, H, W) of every rank's batch together, like
/// torch.nn.SyncBatchNorm(C, eps, momentum, process_group=...). Input and output (N, C, H, W)
/// (or (N, C)).
///
/// It is a BatchNorm2d with another forward: the same parameters and buffers under the same
/// names (weight, bias, running_mean, running_var, num_batches_tracked), so state_dicts move
/// between the two, and a model's typed BatchNorm2d members (ResNet's `bn1`) can hold one.
/// (PyTorch's SyncBatchNorm is a sibling of BatchNorm2d, not a subclass; C++'s typed members
/// are why it is one here.)
///
/// Training forward: the statistics of the union of all ranks' batches, weighted by each
/// rank's count, so ranks may hold different numbers of images, even none (an empty rank
/// still joins both collectives); running_var is updated with the unbiased global variance.
/// Every rank of the group must run the same SyncBatchNorm forwards and backwards in the same
/// order: they are collectives, named "SyncBatchNorm forward statistics" and "SyncBatchNorm
/// backward sums" in the watchdog's and the fingerprint check's messages. The weight and bias
/// gradients are each rank's own, as in PyTorch: DistributedDataParallel averages them.
///
/// No collective runs, and it is exactly BatchNorm2d, when: it is in eval mode (running
/// statistics); the group has one rank; or no group was given and init_process_group has
/// not run (PyTorch's fallback when torch.distributed is not initialised).
/// For 16-bit input (autocast) the statistics are f32, as BatchNorm2d's.
class SyncBatchNorm : public BatchNorm2d {
 public:
  /// C channels; weight ones, bias zeros, running_mean zeros, running_var ones. The statistics
  /// are shared over `process_group`, which must outlive the module; null means the default
  /// group (default_process_group()), looked up at each training forward, so the module can
  /// be built before init_process_group.
  explicit SyncBatchNorm(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                         ProcessGroup* process_group = nullptr);

  /// x: (N, C, H, W) -> (N, C, H, W), or (N, C) -> (N, C); N may be 0 on some ranks.
  Tensor forward(const Tensor& input) override;
  /// A new SyncBatchNorm with the same settings and group (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;

  /// The group given to the constructor; null for the default group.
  ProcessGroup* process_group() const { return process_group_; }

 private:
  ProcessGroup* process_group_;
};

/// Returns `module` with every BatchNorm2d in it, at any depth, replaced by a SyncBatchNorm on
/// `process_group` (null: the default group) with the same settings, the same parameter and
/// buffer values, dtypes, devices and requires_grad, and the same training mode, under the same
/// name, as torch.nn.SyncBatchNorm.convert_sync_batchnorm. The state_dict keeps its keys and
/// values. Children are replaced in place with Module::replace_module (a module of your own with
/// typed members for its BatchNorm2d children must re-point them in on_module_replaced, as
/// ResNet does); if `module` itself is a BatchNorm2d, the new SyncBatchNorm is returned instead.
/// SyncBatchNorm layers already there are left alone.
///
/// Unlike PyTorch, whose new layers take over the old parameter *objects*, the new layers hold
/// copies: convert before building the optimizer (and before wrapping in
/// DistributedDataParallel), the usual order anyway.
std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module, ProcessGroup* process_group = nullptr);

}  // namespace lockstep
