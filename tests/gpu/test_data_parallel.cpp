// DataParallel with replicas sharing one GPU (each on its own stream): the same outputs and
// gradients as one module on the CPU, BatchNorm's buffers kept from replica 0 only, and inputs
// scattered from pinned CPU memory.
#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

std::vector<Device> on_gpu(int replicas) { return std::vector<Device>(static_cast<size_t>(replicas), gpu()); }

Tensor class_labels(int64_t n) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i) values.push_back((i * 3 + 1) % 10);
  return from_vector_i64(values, {n});
}

}  // namespace

TEST(DataParallelCuda, ReplicasSharingOneGpuMatchOneModuleOnTheCpu) {
  for (const int replicas : {2, 3}) {
    manual_seed(7);
    const auto reference = make_model("cnn");
    manual_seed(7);
    const auto model = make_model("cnn");
    model->to(gpu());
    DataParallel parallel(model, on_gpu(replicas));
    const Tensor x = random_cpu({13, 1, 28, 28}, 11), y = class_labels(13);  // 13 rows: uneven chunks

    const Tensor expected = (*reference)(x);
    cross_entropy(expected, y).backward();
    const Tensor out = parallel(x.pin_memory());  // scattered from pinned memory
    cross_entropy(out, y.to(gpu())).backward();

    const std::string where = std::to_string(replicas) + " replicas";
    expect_close(expected, out, 1e-4, 1e-5, "output, " + where);
    const auto mine = reference->named_parameters(), theirs = model->named_parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      expect_close(mine[i].second.grad(), theirs[i].second.grad(), 1e-3, 1e-5, theirs[i].first + " grad, " + where);
    }
  }
}

TEST(DataParallelCuda, SeveralStepsTrainLikeOneModuleOnTheCpu) {
  // Memory freed by one step is reused by the next on the replicas' streams: the steps must
  // still agree with the CPU.
  manual_seed(3);
  const auto reference = make_model("cnn");
  manual_seed(3);
  const auto model = make_model("cnn");
  model->to(gpu());
  DataParallel parallel(model, on_gpu(2));
  SGD reference_sgd(reference->parameters(), SGDOptions(0.05).momentum(0.9));
  SGD parallel_sgd(parallel.parameters(), SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    const Tensor x = random_cpu({16, 1, 28, 28}, 20 + static_cast<uint64_t>(step)), y = class_labels(16);
    reference_sgd.zero_grad();
    cross_entropy((*reference)(x), y).backward();
    reference_sgd.step();
    parallel_sgd.zero_grad();
    cross_entropy(parallel(x), y.to(gpu())).backward();
    parallel_sgd.step();
  }
  const auto mine = reference->named_parameters(), theirs = model->named_parameters();
  for (size_t i = 0; i < mine.size(); ++i) expect_close(mine[i].second, theirs[i].second, 1e-3, 1e-5, theirs[i].first);
  // Evaluation through the wrapper: no graph, the same logits as the CPU model.
  NoGradGuard no_grad;
  const Tensor x = random_cpu({9, 1, 28, 28}, 40);
  const Tensor logits = parallel(x);
  EXPECT_FALSE(logits.requires_grad());
  expect_close((*reference)(x), logits, 1e-3, 1e-4, "evaluation logits");
}

TEST(DataParallelCuda, OnlyReplicaZeroUpdatesBatchNormStatistics) {
  auto norm = std::make_shared<BatchNorm2d>(3);
  norm->to(gpu());
  DataParallel parallel(norm, on_gpu(2));
  const Tensor x = random_cpu({8, 3, 4, 4}, 12);
  parallel(x.to(gpu()));
  BatchNorm2d reference(3);
  reference(x.slice(0, 0, 4));
  expect_close(reference.running_mean, norm->running_mean, 1e-5, 1e-6, "running_mean");
  expect_close(reference.running_var, norm->running_var, 1e-5, 1e-6, "running_var");
}

TEST(DataParallelCuda, TheModuleMustBeOnTheGpu) {
  DataParallel parallel(std::make_shared<Linear>(3, 2), on_gpu(2));
  try {
    parallel(ones({4, 3}));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but 'weight' is on cpu: call model->to(cuda:0)"), std::string::npos) << e.what();
  }
}
