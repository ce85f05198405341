// SyncBatchNorm and convert_sync_batchnorm (declared in distributed/sync_batch_norm.h). The
// arithmetic is the op sync_batch_norm (tensor/ops/batch_norm.cpp); this file supplies its two
// collectives over a process group, under the names the watchdog prints.
#include "distributed/sync_batch_norm.h"

#include <utility>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/init_process_group.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/batch_norm.h"
#include "tensor/ops/elementwise.h"

namespace lockstep {

SyncBatchNorm::SyncBatchNorm(int64_t num_features, double eps, double momentum, ProcessGroup* process_group)
    : BatchNorm2d(num_features, eps, momentum), process_group_(process_group) {}

Tensor SyncBatchNorm::forward(const Tensor& input) {
  LOCKSTEP_CHECK(input.dim() == 4 || input.dim() == 2, "SyncBatchNorm: expected 4D input (N, C, H, W) or 2D input ",
                 "(N, C), got ", input.dim(), "D input of shape ", shape_str(input.shape()));
  LOCKSTEP_CHECK(input.size(1) == num_features, "SyncBatchNorm: expected ", num_features,
                 " channels, got input of shape ", shape_str(input.shape()));
  // Eval mode: the running statistics, the same on every rank; nothing to exchange.
  if (!is_training()) return batch_norm(input, running_mean, running_var, weight, bias, false, momentum, eps);

  {
    // As BatchNorm2d: a counter outside autograd, on its own device.
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked.to(DType::f64) + 1.0);
  }
  ProcessGroup* group = process_group_;
  if (group == nullptr && is_initialized()) group = &default_process_group();
  // One process: its batch is the global batch, and BatchNorm2d's op gives the same result
  // without collectives (PyTorch falls back the same way).
  if (group == nullptr || group->size() == 1) {
    return batch_norm(input, running_mean, running_var, weight, bias, true, momentum, eps);
  }

  BatchNormCollectives collectives;
  collectives.all_gather = [group](const Tensor& local) {
    // local: (1, 2C + 1) -> (world, 2C + 1), rank 0's row first.
    Tensor all = empty({group->size(), local.size(1)}, local.options());
    CollectiveCaller caller("SyncBatchNorm forward statistics");
    group->all_gather(all, local);
    return all;
  };
  collectives.all_reduce_sum = [group](const Tensor& sums) {
    // sums: (2C) = [sum_dy | sum_dy_xmu], summed over the ranks in place.
    CollectiveCaller caller("SyncBatchNorm backward sums");
    group->all_reduce(sums, ReduceOp::Sum);
  };
  return sync_batch_norm(input, running_mean, running_var, weight, bias, momentum, eps, collectives);
}

std::shared_ptr<Module> SyncBatchNorm::clone_structure() const {
  return std::make_shared<SyncBatchNorm>(num_features, eps, momentum, process_group_);
}

namespace {

// A SyncBatchNorm with `bn`'s settings, values, dtypes, devices, requires_grad and mode.
std::shared_ptr<SyncBatchNorm> sync_copy_of(const BatchNorm2d& bn, ProcessGroup* process_group) {
  auto sync = std::make_shared<SyncBatchNorm>(bn.num_features, bn.eps, bn.momentum, process_group);
  NoGradGuard no_grad;
  const std::pair<Tensor, Tensor> pairs[] = {{sync->weight, bn.weight},
                                             {sync->bias, bn.bias},
                                             {sync->running_mean, bn.running_mean},
                                             {sync->running_var, bn.running_var},
                                             {sync->num_batches_tracked, bn.num_batches_tracked}};
  for (const auto& [to, from] : pairs) {
    // set_data keeps the new tensor's identity (the registered entry) and takes a copy of the
    // old one's data, whatever its dtype and device: bitwise the same values.
    to.set_data(from.detach().clone());
    if (to.requires_grad() != from.requires_grad()) to.requires_grad_(from.requires_grad());
  }
  sync->train(bn.is_training());
  return sync;
}

bool is_plain_batch_norm(const std::shared_ptr<Module>& module) {
  return std::dynamic_pointer_cast<BatchNorm2d>(module) != nullptr &&
         std::dynamic_pointer_cast<SyncBatchNorm>(module) == nullptr;
}

}  // namespace

std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module, ProcessGroup* process_group) {
  LOCKSTEP_CHECK(module != nullptr, "convert_sync_batchnorm: expected a module, got null");
  if (is_plain_batch_norm(module)) {
    return sync_copy_of(*std::dynamic_pointer_cast<BatchNorm2d>(module), process_group);
  }
  // Depth first, as PyTorch's recursion: each child converted, then put back under its name.
  for (const auto& [name, child] : module->named_children()) {
    std::shared_ptr<Module> converted = convert_sync_batchnorm(child, process_group);
    if (converted != child) module->replace_module(name, converted);
  }
  return module;
}

}  // namespace lockstep
