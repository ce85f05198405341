// DataParallel on CPU replicas (devices may repeat, so every rule runs without a GPU): scatter
// like chunk(), gather, replicate through autograd, gradients equal to one module's on the whole
// batch, errors from replicas, BatchNorm's buffers, and the checks PyTorch makes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../common/replica_probes.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

std::vector<int64_t> rows_of(const std::vector<Tensor>& chunks) {
  std::vector<int64_t> rows;
  for (const Tensor& chunk : chunks) rows.push_back(chunk.size(0));
  return rows;
}

// A small convolutional model in float64 (no BatchNorm, no dropout): DataParallel must give it
// exactly the gradients of one module, up to the order of additions.
// x: (N, 1, 8, 8) -> (N, 4, 6, 6) -> (N, 4, 3, 3) -> (N, 36) -> (N, 5)
std::shared_ptr<Module> small_cnn(uint64_t seed) {
  manual_seed(seed);
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 4, 3), std::make_shared<ReLU>(),
                                            std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
                                            std::make_shared<Linear>(36, 5));
  model->to(DType::f64);
  return model;
}

Tensor images(int64_t n) { return randn({n, 1, 8, 8}, TensorOptions().dtype(DType::f64)); }

Tensor labels(int64_t n) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i) values.push_back((i * 7 + 3) % 5);
  return from_vector(values, {n});
}

void expect_close(const Tensor& actual, const Tensor& expected, double tolerance, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], tolerance * std::max(1.0, std::abs(e[i]))) << what << " element " << i;
  }
}

// One module on the whole batch against DataParallel over `replicas` CPU replicas: the same
// output and the same parameter gradients.
void expect_same_gradients(int replicas, int64_t batch) {
  const auto single = small_cnn(1), wrapped = small_cnn(1);
  DataParallel parallel(wrapped, cpus(replicas));
  const Tensor x = images(batch), y = labels(batch);

  const Tensor expected_out = (*single)(x);
  cross_entropy(expected_out, y).backward();
  const Tensor out = parallel(x);
  cross_entropy(out, y).backward();

  const std::string where = std::to_string(replicas) + " replicas, batch " + std::to_string(batch);
  expect_close(out, expected_out, 1e-12, "output, " + where);
  const auto expected = single->named_parameters(), actual = wrapped->named_parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(actual[i].second.grad().defined()) << actual[i].first;
    expect_close(actual[i].second.grad(), expected[i].second.grad(), 1e-12, actual[i].first + " grad, " + where);
  }
}

}  // namespace

TEST(Scatter, CutsLikeChunk) {
  const Tensor x = arange(0, 13).reshape({13, 1});
  EXPECT_EQ(rows_of(scatter(x, cpus(6))), (std::vector<int64_t>{3, 3, 3, 3, 1}));  // five chunks for six devices
  EXPECT_EQ(rows_of(scatter(x, cpus(2))), (std::vector<int64_t>{7, 6}));
  EXPECT_EQ(rows_of(scatter(x, cpus(1))), (std::vector<int64_t>{13}));
  EXPECT_EQ(rows_of(scatter(arange(0, 2).reshape({2, 1}), cpus(3))), (std::vector<int64_t>{1, 1}));
  // The chunks are the rows in order.
  const auto chunks = scatter(x, cpus(3));  // 5, 5, 3
  EXPECT_EQ(chunks[1].to_vector<float>(), (std::vector<float>{5, 6, 7, 8, 9}));
  EXPECT_EQ(chunks[2].to_vector<float>(), (std::vector<float>{10, 11, 12}));
}

TEST(Scatter, Errors) {
  expect_error([] { scatter(zeros({}), cpus(2)); }, "scatter: expected a batch of at least one row along dim 0, got shape []");
  expect_error([] { scatter(zeros({0, 3}), cpus(2)); }, "at least one row");
  expect_error([] { scatter(zeros({4}), {}); }, "scatter: expected at least one device");
}

TEST(Gather, JoinsRowsAndTurnsScalarsIntoAVector) {
  const Tensor joined = gather({ones({2, 3}), zeros({1, 3})}, Device::cpu());
  EXPECT_EQ(joined.shape(), (Shape{3, 3}));
  EXPECT_EQ(joined.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 1, 1, 0, 0, 0}));
  const Tensor losses = gather({full({}, 0.5), full({}, 1.5)}, Device::cpu());
  EXPECT_EQ(losses.shape(), (Shape{2}));
  EXPECT_EQ(losses.to_vector<float>(), (std::vector<float>{0.5f, 1.5f}));
}

TEST(Replicate, ParametersAreCopiesLinkedToTheOriginalsByAutograd) {
  auto linear = std::make_shared<Linear>(3, 2);
  const auto replicas = replicate(*linear, cpus(2));
  ASSERT_EQ(replicas.size(), 2u);
  for (const auto& replica : replicas) {
    const Tensor weight = replica->named_parameters()[0].second;
    EXPECT_FALSE(weight.is_leaf());
    ASSERT_NE(weight.grad_fn(), nullptr);
    EXPECT_EQ(weight.grad_fn()->name(), "BroadcastBackward");
    EXPECT_EQ(weight.to_vector<float>(), linear->weight.to_vector<float>());
  }
  // Replica 0 shares the original's memory; replica 1 has its own copy.
  EXPECT_EQ(replicas[0]->named_parameters()[0].second.storage(), linear->weight.storage());
  EXPECT_NE(replicas[1]->named_parameters()[0].second.storage(), linear->weight.storage());
  // Gradients through both replicas are summed into the original's grad.
  const Tensor x = ones({1, 3});
  (sum((*replicas[0])(x)) + sum((*replicas[1])(x))).backward();
  EXPECT_EQ(linear->bias.grad().to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(linear->weight.grad().to_vector<float>(), (std::vector<float>(6, 2.0f)));
}

TEST(Replicate, LeavesTheRandomStreamAlone) {
  manual_seed(5);
  const auto expected = rand({4}).to_vector<float>();
  manual_seed(5);
  const auto model = make_model("cnn");  // draws its own weights
  manual_seed(5);
  replicate(*model, cpus(3));  // builds three more models, which draw nothing
  EXPECT_EQ(rand({4}).to_vector<float>(), expected);
}

TEST(Replicate, EveryModelCanBeReplicated) {
  for (const std::string name : {"mlp", "cnn", "resnet"}) {
    const auto model = make_model(name);
    const auto replicas = replicate(*model, cpus(2));
    EXPECT_EQ(replicas[1]->str(), model->str()) << name;
    EXPECT_EQ(replicas[1]->state_dict().size(), model->state_dict().size()) << name;
  }
}

TEST(Replicate, ASubclassMustOverrideCloneStructure) {
  // Inherits Linear::clone_structure, which would build a plain Linear running Linear::forward.
  class NegatedLinear : public Linear {
   public:
    NegatedLinear() : Linear(2, 2) {}
    Tensor forward(const Tensor& input) override { return neg(Linear::forward(input)); }
  };
  expect_error([] { replicate(NegatedLinear(), cpus(2)); },
               "replicate: clone_structure() of NegatedLinear built a Linear: override clone_structure() in NegatedLinear");
  const auto nested = std::make_shared<Sequential>(std::make_shared<ReLU>(), std::make_shared<NegatedLinear>());
  expect_error([&] { replicate(*nested, cpus(2)); }, "clone_structure() of NegatedLinear (at '1') built a Linear");
}

TEST(Replicate, AModuleWithoutCloneStructureIsAClearError) {
  class Doubler : public Module {
   public:
    Tensor forward(const Tensor& input) override { return input * 2.0; }
  };
  expect_error([] { replicate(Doubler(), cpus(2)); },
               "Doubler cannot be replicated: override clone_structure() in Doubler to return a new Doubler");
}

TEST(DataParallel, GradientsEqualOneModuleOnTheWholeBatch) {
  expect_same_gradients(2, 12);
  expect_same_gradients(3, 12);
}

TEST(DataParallel, UnevenBatches) {
  expect_same_gradients(2, 13);  // 7 + 6
  expect_same_gradients(3, 13);  // 5 + 5 + 3
  expect_same_gradients(3, 7);   // 3 + 3 + 1
}

TEST(DataParallel, FewerRowsThanReplicas) {
  expect_same_gradients(3, 2);  // two chunks of one row: only two replicas run
  expect_same_gradients(3, 1);
}

TEST(DataParallel, TrainsLikeOneModule) {
  const auto single = small_cnn(2), wrapped = small_cnn(2);
  DataParallel parallel(wrapped, cpus(3));
  SGD single_sgd(single->parameters(), SGDOptions(0.1).momentum(0.9));
  SGD parallel_sgd(parallel.parameters(), SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    const Tensor x = images(10), y = labels(10);
    single_sgd.zero_grad();
    cross_entropy((*single)(x), y).backward();
    single_sgd.step();
    parallel_sgd.zero_grad();
    cross_entropy(parallel(x), y).backward();
    parallel_sgd.step();
  }
  const auto expected = single->named_parameters(), actual = wrapped->named_parameters();
  for (size_t i = 0; i < expected.size(); ++i) expect_close(actual[i].second, expected[i].second, 1e-12, actual[i].first);
}

// Autocast is a per-thread setting: the replicas, on their own threads, must still run in the
// caller's region, and the gradients still reach the f32 parameters.
TEST(DataParallel, ReplicasRunInTheCallersAutocastRegion) {
  auto wrapped = std::make_shared<Linear>(6, 4);
  DataParallel parallel(wrapped, cpus(3));
  Tensor y;
  {
    const AutocastGuard region(DeviceType::CPU, DType::bf16);
    y = parallel(randn({9, 6}));
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  sum(y.to(DType::f32)).backward();
  EXPECT_EQ(wrapped->weight.grad().dtype(), DType::f32);
}

TEST(DataParallel, AnErrorInAReplicaReachesTheCaller) {
  DataParallel parallel(std::make_shared<PicksyLinear>(), cpus(4));
  expect_error([&] { parallel(ones({13, 2})); }, "replica 3 on cpu failed: PicksyLinear: expected more than one row");
  EXPECT_EQ(parallel(ones({12, 2})).shape(), (Shape{12, 2}));  // still usable afterwards
}

// A layer that fails as a GPU without free memory does, on every replica.
class OutOfMemoryLinear : public Linear {
 public:
  OutOfMemoryLinear() : Linear(2, 2) {}
  Tensor forward(const Tensor&) override { throw Error(ErrorKind::OutOfMemory, "OutOfMemoryLinear: no memory left"); }
  std::shared_ptr<Module> clone_structure() const override { return std::make_shared<OutOfMemoryLinear>(); }
};

TEST(DataParallel, AReplicasErrorKeepsItsKind) {
  DataParallel parallel(std::make_shared<OutOfMemoryLinear>(), cpus(2));
  expect_error([&] { parallel(ones({4, 2})); }, ErrorKind::OutOfMemory,
               "replica 0 on cpu failed: OutOfMemoryLinear: no memory left");
}

TEST(DataParallel, OnlyReplicaZeroUpdatesBatchNormStatistics) { expect_only_replica_zero_updates_batch_norm(cpus(2)); }

TEST(DataParallel, GradModeReachesTheReplicas) { expect_grad_mode_reaches_two_replicas(cpus(2)); }

TEST(DataParallel, DropoutMasksFollowTheSeed) { expect_dropout_masks_follow_the_seed(cpus(3)); }

TEST(DataParallel, SettingsChangedAfterWrappingReachTheReplicas) {
  auto dropout = std::make_shared<Dropout>(0.5);
  DataParallel parallel(dropout, cpus(2));
  dropout->p = 0.0;  // the replicas are built again for the new setting
  EXPECT_EQ(parallel(ones({6, 4})).to_vector<float>(), std::vector<float>(24, 1.0f));
}

TEST(DataParallel, EachModuleKeepsItsOwnTrainingMode) {
  manual_seed(6);
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 2, 3), std::make_shared<BatchNorm2d>(2));
  auto norm = std::dynamic_pointer_cast<BatchNorm2d>((*model)[1]);
  norm->eval();  // frozen statistics inside a model in training mode
  DataParallel parallel(model, cpus(2));
  parallel(randn({4, 1, 5, 5}));
  EXPECT_EQ(norm->num_batches_tracked.item(), 0.0);
  EXPECT_EQ(norm->running_mean.to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(DataParallel, FrozenParametersGetNoGradient) {
  const auto model = small_cnn(5);
  const Tensor frozen = model->named_parameters()[0].second;  // the convolution's weight
  frozen.requires_grad_(false);
  DataParallel parallel(model, cpus(2));
  cross_entropy(parallel(images(6)), labels(6)).backward();
  EXPECT_FALSE(frozen.grad().defined());
  EXPECT_TRUE(model->named_parameters()[1].second.grad().defined());
}

TEST(DataParallel, OneDeviceRunsTheModuleItself) {
  const auto single = small_cnn(8), wrapped = small_cnn(8);
  DataParallel parallel(wrapped, cpus(1));
  const Tensor x = images(5);
  expect_close(parallel(x), (*single)(x), 0.0, "output");
}

TEST(DataParallel, StateDictKeysCarryTheModulePrefix) {
  DataParallel parallel(std::make_shared<Linear>(3, 2), cpus(2));
  const StateDict wrapped = parallel.state_dict(), inner = parallel.module().state_dict();
  EXPECT_EQ(wrapped.begin()->first, "module.weight");
  EXPECT_EQ(inner.begin()->first, "weight");
  EXPECT_EQ(parallel.parameters().size(), 2u);  // what an optimiser gets
}

TEST(DataParallel, TheModuleMustBeOnTheFirstDevice) {
  DataParallel parallel(std::make_shared<Linear>(3, 2), {Device::cuda(0), Device::cuda(0)});
  expect_error([&] { parallel(ones({4, 3})); },
               "DataParallel: the module must have its parameters and buffers on devices[0] (cuda:0), but 'weight' is on "
               "cpu: call model->to(cuda:0) before the forward pass");
  expect_error([] { DataParallel(std::make_shared<Linear>(3, 2), {}); }, "DataParallel: expected at least one device");
}

TEST(DataParallel, TimesEveryPhase) {
  DataParallel parallel(small_cnn(4), cpus(2));
  cross_entropy(parallel(images(8)), labels(8)).backward();
  const DataParallelTimes times = parallel.times();
  EXPECT_EQ(times.steps, 1);
  EXPECT_GT(times.forward, 0.0);
  EXPECT_GT(times.replicate, 0.0);
  EXPECT_EQ(times.reduce, 0.0);  // the gradients were on the CPU already: nothing was sent back
  parallel.reset_times();
  EXPECT_EQ(parallel.times().steps, 0);
  EXPECT_EQ(parallel.times().reduce, 0.0);
}
