#include "distributed/distributed_data_parallel.h"

#include <optional>
#include <string>
#include <utility>

#include "tensor/autograd/grad_mode.h"
#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/rank_agreement.h"
#include "util/fnv1a.h"
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

// A device as one number, so that the ranks can compare it and a message can name it.
uint64_t device_code(Device device) {
  return (static_cast<uint64_t>(device.type()) << 16) | static_cast<uint64_t>(device.index());
}
std::string device_from_code(uint64_t code) {
  return Device(static_cast<DeviceType>(code >> 16), static_cast<int>(code & 0xffff)).str();
}

// 5160 -> "5,160".
std::string with_thousands(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

// Two bucket sizes side by side: rounded, unless rounding would make them look equal.
std::pair<std::string, std::string> two_sizes(int64_t a, int64_t b) {
  auto rounded = [](int64_t bytes) { return bytes < 10 * 1024 ? with_thousands(bytes) + " B" : bytes_str(bytes); };
  if (rounded(a) != rounded(b)) return {rounded(a), rounded(b)};
  return {with_thousands(a) + " B", with_thousands(b) + " B"};
}

constexpr const char* kSameCaps =
    " (different bucket_cap_mb / first_bucket_cap_mb?); every rank must pass the same bucket caps";

// Every rank must wrap the same model, bucket it the same way and send it in the same dtype:
// otherwise the all-reduces of the first backward would pair up buffers of different sizes and
// hang, fail, or mix up gradients. Two all-gathers in all: the counts first (the second one's
// lists must have the same length on every rank), then one fingerprint per parameter and the
// layout of every bucket. A parameter that differs is named before anything it causes (a
// different bucket, say).
void check_same_setup(ProcessGroup& group, const std::vector<std::pair<std::string, Tensor>>& params,
                      const std::vector<BucketSummary>& buckets, CommHook hook, bool shard_gradients, Device device) {
  const CollectiveCaller caller("DDP constructor checks");
  // Items: 0 the number of parameters, 1 of buckets, 2 the hook, 3 whether gradients are
  // sharded. find_disagreement reports the first item that differs, so the bucket counts agree
  // unless it is item 0 or 1.
  const std::optional<Disagreement> counts =
      find_disagreement(group,
                        {static_cast<uint64_t>(params.size()), static_cast<uint64_t>(buckets.size()),
                         static_cast<uint64_t>(hook), static_cast<uint64_t>(shard_gradients)},
                        device);
  LOCKSTEP_CHECK(!counts || counts->item != 0, "DistributedDataParallel: the ranks wrap different models: rank 0 has ",
                 counts ? counts->values[0] : 0, " parameters, rank(s) ", counts ? rank_list(counts->ranks) : "",
                 " have a different number (this rank has ", params.size(), ")");
  const bool same_bucket_count = !counts || counts->item != 1;

  std::vector<uint64_t> values;
  for (const auto& [name, p] : params) {
    uint64_t hash = fnv1a(p.shape().data(), p.shape().size() * sizeof(int64_t));
    const int dtype = static_cast<int>(p.dtype());
    values.push_back(fnv1a(&dtype, sizeof(dtype), hash));
  }
  constexpr size_t kPerBucket = 4;  // bytes, elements, dtype, device
  if (same_bucket_count) {
    for (const BucketSummary& bucket : buckets) {
      values.push_back(static_cast<uint64_t>(bucket.bytes));
      values.push_back(static_cast<uint64_t>(bucket.numel));
      values.push_back(static_cast<uint64_t>(bucket.dtype));
      values.push_back(device_code(bucket.device));
    }
  }
  const std::optional<Disagreement> differ = find_disagreement(group, values, device);

  if (differ && differ->item < params.size()) {
    const auto& [name, p] = params[differ->item];
    LOCKSTEP_FAIL("DistributedDataParallel: parameter \"", name, "\" (number ", differ->item,
                  ") differs in shape or dtype between rank 0 and rank(s) ", rank_list(differ->ranks),
                  "; on this rank it is ", shape_str(p.shape()), " ", dtype_name(p.dtype()),
                  ". Every rank must build the same model");
  }
  if (counts && counts->item == 2) {
    LOCKSTEP_FAIL("DistributedDataParallel: the ranks chose different communication hooks: rank 0 uses ",
                  comm_hook_name(static_cast<CommHook>(counts->values[0])), ", rank(s) ",
                  rank_list(counts->ranks), " a different one (this rank uses ", comm_hook_name(hook),
                  "); every rank must pass the same DistributedDataParallelOptions::comm_hook");
  }
  if (counts && counts->item == 3) {
    LOCKSTEP_FAIL("DistributedDataParallel: rank 0 ", counts->values[0] ? "shards" : "does not shard",
                  " its gradients, rank(s) ", rank_list(counts->ranks), counts->values[0] ? " do not" : " do",
                  "; every rank must pass the same DistributedDataParallelOptions::shard_gradients");
  }
  if (counts && counts->item == 1) {
    const int other = counts->ranks.front();
    LOCKSTEP_FAIL("DistributedDataParallel: the ranks built different buckets: ",
                  counts->values[other], " bucket(s) on rank ", other, " but ", counts->values[0],
                  " on rank 0", kSameCaps);
  }
  if (differ) {
    const size_t bucket = (differ->item - params.size()) / kPerBucket;
    const int other = differ->ranks.front();
    const uint64_t theirs = differ->values[other], ours = differ->values[0];
    std::string what;
    switch ((differ->item - params.size()) % kPerBucket) {
      case 0: {
        const auto [a, b] = two_sizes(static_cast<int64_t>(theirs), static_cast<int64_t>(ours));
        what = detail::concat("bucket ", bucket, " holds ", a, " on rank ", other, " but ", b, " on rank 0", kSameCaps);
        break;
      }
      case 1:
        what = detail::concat("bucket ", bucket, " holds ", with_thousands(static_cast<int64_t>(theirs)),
                              " elements on rank ", other, " but ", with_thousands(static_cast<int64_t>(ours)),
                              " on rank 0", kSameCaps);
        break;
      case 2:
        what = detail::concat("bucket ", bucket, " holds ", dtype_name(static_cast<DType>(theirs)), " gradients on rank ",
                              other, " but ", dtype_name(static_cast<DType>(ours)),
                              " on rank 0; every rank must give its parameters the same dtypes");
        break;
      default:
        what = detail::concat("bucket ", bucket, " lives on ", device_from_code(theirs), " on rank ", other, " but on ",
                              device_from_code(ours), " on rank 0; every rank must put its model on the same kind of "
                              "device");
        break;
    }
    throw Error("DistributedDataParallel: the ranks built different buckets: " + what);
  }
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

  // The buckets and their hooks (nothing is sent yet).
  reducer_ = std::make_unique<Reducer>(params, group_,
                                       ReducerOptions()
                                           .first_bucket_bytes(static_cast<int64_t>(options_.first_bucket_cap_mb() * kMiB))
                                           .bucket_bytes(static_cast<int64_t>(options_.bucket_cap_mb() * kMiB))
                                           .find_unused_parameters(options_.find_unused_parameters())
                                           .gradient_as_bucket_view(options_.gradient_as_bucket_view())
                                           .comm_hook(options_.comm_hook())
                                           .shard_gradients(options_.shard_gradients()));

  // Same model, same buckets and the same dtype on the wire everywhere?
  check_same_setup(group_, params, reducer_->buckets(), options_.comm_hook(), options_.shard_gradients(), device);

  // Same starting point everywhere: rank 0's parameters and buffers, copied to all ranks.
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
}

void DistributedDataParallel::sync_buffers() { sync_buffers_from(0); }

void DistributedDataParallel::sync_buffers_from(int source) {
  if (group_.size() == 1) return;
  NoGradGuard no_grad;
  const auto buffers = module_->named_buffers();
  const RecordFunction span(buffers.empty() ? "" : "DDP: broadcast buffers", "ddp");
  const CollectiveCaller caller("DDP: sync buffers");
  for (const auto& [name, b] : buffers) group_.broadcast(b, source);
}

namespace {
// What a rank still training announces to a Join for its iteration.
constexpr int64_t kLocalBackward = 1;      // the backward stays local (no_sync, NoGradGuard)
constexpr int64_t kAveragingBackward = 2;  // the backward averages: shadow every bucket
}  // namespace

Tensor DistributedDataParallel::forward(const Tensor& input) {
  // Decided at forward time, as in PyTorch: a forward that records a graph outside no_sync()
  // makes the next backward average. Other forwards (inside no_sync(), or under NoGradGuard
  // for evaluation) leave the reducer alone, so a backward they come between still averages.
  const bool sync = require_sync_ && grad_mode_enabled();
  int buffer_source = 0;
  int divisor = 0;  // the world size
  if (active_join() != nullptr) {
    // Inside a Join the ranks that ran out of inputs wait in this all-reduce: it tells them
    // that one more iteration comes, and whether its backward averages (so that they start
    // the same collectives with zeros).
    const JoinRound round = notify_join(sync ? kAveragingBackward : kLocalBackward);
    check_same_iteration(round);
    // Rank 0 may have run out, and its buffers stopped following the training.
    buffer_source = round.first_active();
    if (!active_join()->options().divide_by_initial_world_size()) divisor = round.num_active();
  }
  // Rank 0's buffers win: with BatchNorm every rank's running statistics drift apart (each
  // sees other samples), so before each forward they are made rank 0's again.
  if (options_.broadcast_buffers()) sync_buffers_from(buffer_source);
  reducer_->prepare_for_forward(sync, divisor);
  return (*module_)(input);
}

void DistributedDataParallel::check_same_iteration(const JoinRound& round) const {
  std::vector<int> averaging, local;
  for (int r : round.active_ranks()) (round.announced[r] == kAveragingBackward ? averaging : local).push_back(r);
  if (averaging.empty() || local.empty()) return;
  LOCKSTEP_FAIL(
      "DistributedDataParallel inside a Join: in this iteration rank(s) ", rank_list(averaging),
      " ran a forward whose backward averages gradients, but rank(s) ", rank_list(local),
      " one whose backward stays local (inside no_sync() or under NoGradGuard); every rank must run the same kind "
      "of forward at the same step, or neither the averaging nor the shadowing of the ranks that ran out can match");
}

//! [join shadow]
void DistributedDataParallel::join_shadow(const JoinRound& round) {
  check_same_iteration(round);
  if (options_.broadcast_buffers()) sync_buffers_from(round.first_active());
  const std::vector<int> active = round.active_ranks();
  if (!active.empty() && round.announced[active.front()] == kAveragingBackward) reducer_->shadow_backward();
}
//! [join shadow]

void DistributedDataParallel::join_finish(int source) {
  NoGradGuard no_grad;
  const CollectiveCaller caller("Join: sync final model");
  const RecordFunction span("Join: sync final model", "ddp");
  for (const auto& [name, p] : module_->named_parameters()) group_.broadcast(p, source);
  if (options_.broadcast_buffers()) {
    for (const auto& [name, b] : module_->named_buffers()) group_.broadcast(b, source);
  }
}

Device DistributedDataParallel::join_device() const { return module_device(*module_); }

}  // namespace lockstep
