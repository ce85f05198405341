#include "common/distributed_evaluation.h"

#include <cstdio>
#include <map>
#include <vector>

#include "core/error.h"
#include "data/data_loader.h"
#include "data/distributed_sampler.h"
#include "distributed/collective_caller.h"
#include "distributed/rank_agreement.h"
#include "tensor/ops/loss.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/max.h"
#include "tensor/ops/reduce.h"
#include "util/trace.h"

namespace lockstep {

//! [evaluate]
// Test accuracy over the whole test set, computed by all ranks together: each evaluates its own
// shard, then three sums (correct, count, loss) are all-reduced, so every rank reports the same
// number. With shuffle off the shards are fixed; when the set does not divide evenly the
// sampler repeats a few samples (padding), and those are counted twice, as in PyTorch.
Evaluation evaluate(Module& model, const std::shared_ptr<const Dataset>& test_set, ProcessGroup& group, Device device) {
  const RecordFunction span("evaluate", "eval");  // a span on the timeline of --trace
  model.eval();
  NoGradGuard no_grad;
  auto shard = std::make_shared<DistributedSampler>(test_set->size(), group.size(), group.rank(),
                                                    DistributedSamplerOptions().shuffle(false));
  DataLoader loader(test_set, DataLoaderOptions(1000).sampler(shard).pin_memory(device.is_cuda()));
  // totals: (correct, count, loss_sum), kept on the device until the end.
  const Tensor totals = zeros({3}, TensorOptions().dtype(DType::f64).device(device));
  for (const Batch& batch : loader) {
    const Tensor inputs = batch.inputs.to(device, true), targets = batch.targets.to(device, true);
    const Tensor logits = model(inputs);  // logits: (B, 10)
    const double n = static_cast<double>(targets.numel());
    totals.select(0, 0).add_(sum(eq(argmax(logits, 1), targets).to(DType::f64)));
    totals.select(0, 1).add_(full({}, n, TensorOptions().dtype(DType::f64).device(device)));
    totals.select(0, 2).add_(cross_entropy(logits, targets).to(DType::f64), n);  // mean * B
  }
  const std::vector<double> mine = totals.to(Device::cpu()).to_vector<double>();
  {
    const CollectiveCaller caller("evaluation totals");
    group.all_reduce(totals, ReduceOp::Sum);
  }
  const std::vector<double> all = totals.to(Device::cpu()).to_vector<double>();
  return {all[0] / all[1], all[2] / all[1], all[1], mine[0] / mine[1]};
}
//! [evaluate]

std::string checksum_hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

uint64_t weights_checksum(Module& model, const StateDict& state) {
  std::map<std::string, Tensor> by_name(state.begin(), state.end());
  uint64_t hash = fnv1a(nullptr, 0);
  for (const auto& [name, p] : model.named_parameters()) {
    const auto found = by_name.find(name);
    LOCKSTEP_CHECK(found != by_name.end(), "weights_checksum: the state dict has no parameter \"", name, "\"");
    const uint64_t one = tensor_checksum(found->second);
    hash = fnv1a(&one, sizeof one, hash);
  }
  return hash;
}

}  // namespace lockstep
