#include "distributed/distributed_data_parallel.h"

#include <string>
#include <utility>

#include "tensor/autograd/grad_mode.h"
#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/rank_agreement.h"
#include "util/trace.h"

namespace lockstep {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The device the module's tensors live on, where DDP's own small messages go too (NCCL moves
// GPU tensors only).
Device module_device(const Module& module) {
  const std::vector<Tensor> params = module.parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

// Every rank must wrap the same model: otherwise the buckets (and hence the all-reduces) would
// not match and the first backward would hang or mix up gradients.
void check_same_parameters(ProcessGroup& group, const std::vector<std::pair<std::string, Tensor>>& params,
                           Device device) {
  const CollectiveCaller caller("DDP constructor checks");
  const std::optional<Disagreement> count =
      find_disagreement(group, {static_cast<uint64_t>(params.size())}, device);
  LOCKSTEP_CHECK(!count, "DistributedDataParallel: the ranks wrap different models: rank 0 has ",
                 count ? count->values[0] : 0, " parameters, rank(s) ", count ? rank_list(count->ranks) : "",
                 " have a different number (this rank has ", params.size(), ")");
  std::vector<uint64_t> fingerprints;
  for (const auto& [name, p] : params) {
    uint64_t hash = fnv1a(p.shape().data(), p.shape().size() * sizeof(int64_t));
    const int dtype = static_cast<int>(p.dtype());
    fingerprints.push_back(fnv1a(&dtype, sizeof(dtype), hash));
  }
  const std::optional<Disagreement> shape = find_disagreement(group, fingerprints, device);
  if (shape) {
    const auto& [name, p] = params[shape->item];
    throw Error(detail::concat("DistributedDataParallel: parameter \"", name, "\" (number ", shape->item,
                               ") differs in shape or dtype between rank 0 and rank(s) ", rank_list(shape->ranks),
                               "; on this rank it is ", shape_str(p.shape()), " ", dtype_name(p.dtype()),
                               ". Every rank must build the same model"));
  }
}

// Buckets sent in f32 by one rank and in 16 bits by another would pair up messages of
// different sizes: an error, garbage or a hang in the first backward.
void check_same_comm_hook(ProcessGroup& group, CommHook hook, Device device) {
  const CollectiveCaller caller("DDP constructor checks");
  const std::optional<Disagreement> differ = find_disagreement(group, {static_cast<uint64_t>(hook)}, device);
  LOCKSTEP_CHECK(!differ, "DistributedDataParallel: the ranks chose different communication hooks: rank 0 uses ",
                 differ ? comm_hook_name(static_cast<CommHook>(differ->values[0])) : "", ", rank(s) ",
                 differ ? rank_list(differ->ranks) : "", " a different one (this rank uses ", comm_hook_name(hook),
                 "); every rank must pass the same DistributedDataParallelOptions::comm_hook");
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 const DistributedDataParallelOptions& options, ProcessGroup& group)
    : module_(std::move(module)), group_(group), options_(options) {
  LOCKSTEP_CHECK(module_ != nullptr, "DistributedDataParallel: expected a module, got nullptr");
  register_module("module", module_);
  // Only parameters that learn take part (frozen ones have no gradient to average).
  std::vector<std::pair<std::string, Tensor>> params;
  for (auto& [name, p] : module_->named_parameters()) {
    if (p.requires_grad()) params.emplace_back(name, p);
  }
  const Device device = module_device(*module_);

  // 1. Same model everywhere, and the same dtype on the wire?
  check_same_parameters(group_, params, device);
  check_same_comm_hook(group_, options_.comm_hook(), device);

  // 2. Same starting point everywhere: rank 0's parameters and buffers, copied to all ranks.
  //    (Each rank initialised its own copy with its own random numbers, or loaded a checkpoint.)
  {
    NoGradGuard no_grad;
    {
      const CollectiveCaller caller("DDP: broadcast parameters");
      for (const auto& [name, p] : module_->named_parameters()) group_.broadcast(p, 0);
    }
    const CollectiveCaller caller("DDP: broadcast buffers");
    for (const auto& [name, b] : module_->named_buffers()) group_.broadcast(b, 0);
  }

  // 3. The buckets and their hooks.
  reducer_ = std::make_unique<Reducer>(std::move(params), group_,
                                       ReducerOptions()
                                           .first_bucket_bytes(static_cast<int64_t>(options_.first_bucket_cap_mb() * kMiB))
                                           .bucket_bytes(static_cast<int64_t>(options_.bucket_cap_mb() * kMiB))
                                           .find_unused_parameters(options_.find_unused_parameters())
                                           .gradient_as_bucket_view(options_.gradient_as_bucket_view())
                                           .comm_hook(options_.comm_hook()));
}

void DistributedDataParallel::sync_buffers() {
  if (group_.size() == 1) return;
  NoGradGuard no_grad;
  const auto buffers = module_->named_buffers();
  const RecordFunction span(buffers.empty() ? "" : "DDP: broadcast buffers", "ddp");
  const CollectiveCaller caller("DDP: sync buffers");
  for (const auto& [name, b] : buffers) group_.broadcast(b, 0);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  // Rank 0's buffers win: with BatchNorm every rank's running statistics drift apart (each
  // sees other samples), so before each forward they are made rank 0's again.
  if (options_.broadcast_buffers()) sync_buffers();
  // Decided at forward time, as in PyTorch: a forward that records a graph outside no_sync()
  // makes the next backward average. Other forwards (inside no_sync(), or under NoGradGuard
  // for evaluation) leave the reducer alone, so a backward they come between still averages.
  reducer_->prepare_for_forward(require_sync_ && grad_mode_enabled());
  return (*module_)(input);
}

}  // namespace lockstep
