// DataParallel with replicas sharing one GPU, each on a stream of its own. The comparisons run
// in f64, where the GPU and the CPU differ only by the order of additions (about 1e-16 per
// operation, see test_training.cpp), so any f32 step shows up far above the tolerance, and so
// does a missing wait between streams or a block of memory reused while a replica still reads
// it, whenever that race is lost (small batches may finish before it matters).
// The references: one module on the CPU (for models without BatchNorm, whose output does not
// depend on how the batch is cut), and DataParallel over as many CPU replicas (for the ResNet,
// whose BatchNorm normalises each replica's chunk by its own statistics).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/busy_gpu.h"
#include "../common/replica_probes.h"
#include "../unit/test_util.h"
#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

std::vector<Device> on_gpu(int replicas) { return std::vector<Device>(static_cast<size_t>(replicas), gpu()); }

// The current stream on the GPU of each thread of an OpenMP team of `threads` threads.
std::vector<cuda::StreamHandle> streams_of_a_team_of(int threads) {
  std::vector<cuda::StreamHandle> streams;
#pragma omp parallel num_threads(threads)
  {
    const cuda::StreamHandle stream = cuda::current_stream(gpu());
#pragma omp critical
    streams.push_back(stream);
  }
  return streams;
}

// Notes the current stream of the thread that runs its forward pass: a replica whose input's
// first element is i writes slot i of the shared vector (as GradModeSpy notes the grad mode).
class StreamSpy : public Module {
 public:
  explicit StreamSpy(std::shared_ptr<std::vector<cuda::StreamHandle>> seen) : seen_(std::move(seen)) {}
  Tensor forward(const Tensor& input) override {
    const auto slot = static_cast<size_t>(input.to(Device::cpu()).to_vector<float>()[0]);
    (*seen_)[slot] = cuda::current_stream(input.device());
    return input;
  }
  std::shared_ptr<Module> clone_structure() const override { return std::make_shared<StreamSpy>(seen_); }

 private:
  std::shared_ptr<std::vector<cuda::StreamHandle>> seen_;
};

// Returns its input (times one, a new tensor) only after milliseconds of other work queued on
// its stream.
class SlowIdentity : public Module {
 public:
  Tensor forward(const Tensor& input) override {
    queue_busy_work(input.device());
    return input * 1.0;
  }
  std::shared_ptr<Module> clone_structure() const override { return std::make_shared<SlowIdentity>(); }
};

// Expects the CNN wrapped in DataParallel over `devices` (the first one holding the model) to
// give one CPU module's output and gradients on 13 rows (uneven chunks), scattered from pinned
// memory without waiting.
void expect_matches_one_cpu_module(const std::vector<Device>& devices, const std::string& where) {
  const auto reference = f64_model("cnn", Device::cpu(), 7), model = f64_model("cnn", devices[0], 7);
  DataParallel parallel(model, devices);
  const Tensor x = random_cpu({13, 1, 28, 28}, 11, DType::f64), y = class_labels(13);

  const Tensor expected = (*reference)(x);
  cross_entropy(expected, y).backward();
  const Tensor out = parallel(x.pin_memory());
  cross_entropy(out, y.to(devices[0])).backward();

  expect_close(expected, out, 1e-10, 1e-12, "output, " + where);
  const auto mine = reference->named_parameters(), theirs = model->named_parameters();
  for (size_t i = 0; i < mine.size(); ++i) {
    expect_close(mine[i].second.grad(), theirs[i].second.grad(), 1e-9, 1e-12, theirs[i].first + " grad, " + where);
  }
}

}  // namespace

// Replicas sharing a GPU overlap only if each queues its kernels on a stream of its own: the
// first on the caller's, the others on the GPU's side streams. (Results alone cannot show
// this: replicas all on one stream compute the same, one after another.)
TEST(DataParallelCuda, EachReplicaSharingTheGpuHasAStreamOfItsOwn) {
  auto seen = std::make_shared<std::vector<cuda::StreamHandle>>(3, nullptr);
  DataParallel parallel(std::make_shared<StreamSpy>(seen), on_gpu(3));
  parallel(from_vector({0, 1, 2}, {3, 1}));
  EXPECT_EQ((*seen)[0], cuda::current_stream(gpu()));
  EXPECT_EQ((*seen)[1], cuda::side_stream(gpu(), 0));
  EXPECT_EQ((*seen)[2], cuda::side_stream(gpu(), 1));
}

// Behind a busy caller, and with replicas slow to produce their outputs: the side streams must
// wait for the chunks the caller's stream copies in, and the caller's stream for the outputs
// before it gathers them. Without either wait, values not yet written are read: the products
// take milliseconds, queueing the rest microseconds.
TEST(DataParallelCuda, StreamsWaitForEachOtherAroundTheReplicas) {
  DataParallel parallel(std::make_shared<SlowIdentity>(), on_gpu(3));
  const Tensor x = random_cpu({12, 5}, 17);
  queue_busy_work(gpu());
  const Tensor out = parallel(x.pin_memory());
  expect_close(x, out, 0, 0, "outputs of slow replicas behind a busy caller");
}

TEST(DataParallelCuda, ReplicasSharingOneGpuMatchOneModuleOnTheCpu) {
  for (const int replicas : {2, 3}) expect_matches_one_cpu_module(on_gpu(replicas), std::to_string(replicas) + " replicas");
}

// Replicas on two GPUs, the first shared by two of them: chunks, weights and outputs cross
// between GPUs, and each gradient comes back to cuda:0 in backward.
TEST(DataParallelCuda, ReplicasOnTwoGpusMatchOneModuleOnTheCpu) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  expect_matches_one_cpu_module({gpu(), Device::cuda(1), gpu()}, "cuda:0, cuda:1, cuda:0");
}

TEST(DataParallelCuda, ResNetTrainsLikeDataParallelOnCpuReplicas) {
  // Several steps, so that memory freed by one step (on the replicas' streams, or freed on the
  // caller's stream during backward) is handed out again by the next; batches large enough that
  // the replicas' kernels are still running when the caller's stream is given more work.
  for (const int replicas : {2, 3}) {
    const auto reference = f64_model("resnet", Device::cpu(), 7), model = f64_model("resnet", gpu(), 7);
    DataParallel cpu_parallel(reference, cpus(replicas)), gpu_parallel(model, on_gpu(replicas));
    SGD cpu_sgd(cpu_parallel.parameters(), SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
    SGD gpu_sgd(gpu_parallel.parameters(), SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
    const std::string where = std::to_string(replicas) + " replicas";
    for (int step = 0; step < 4; ++step) {
      const Tensor x = random_cpu({48, 3, 32, 32}, 30 + static_cast<uint64_t>(step), DType::f64);
      const Tensor y = class_labels(48, step);
      cpu_sgd.zero_grad();
      const Tensor cpu_loss = cross_entropy(cpu_parallel(x), y);
      cpu_loss.backward();
      cpu_sgd.step();
      gpu_sgd.zero_grad();
      const Tensor gpu_loss = cross_entropy(gpu_parallel(x.pin_memory()), y.to(gpu()));
      gpu_loss.backward();
      gpu_sgd.step();
      EXPECT_NEAR(gpu_loss.item(), cpu_loss.item(), 1e-10 * std::abs(cpu_loss.item())) << "step " << step << ", " << where;
    }
    expect_same_named_tensors(reference->named_parameters(), model->named_parameters(), "parameters, " + where);
    // BatchNorm's statistics come from replica 0's chunk on both devices.
    expect_same_named_tensors(reference->named_buffers(), model->named_buffers(), "buffers, " + where);
    // Evaluation through the wrapper: running statistics, no graph.
    cpu_parallel.eval();
    gpu_parallel.eval();
    NoGradGuard no_grad;
    const Tensor x = random_cpu({9, 3, 32, 32}, 40, DType::f64);
    expect_close(cpu_parallel(x), gpu_parallel(x), 1e-9, 1e-12, "evaluation logits, " + where);
  }
}

TEST(DataParallelCuda, OnlyReplicaZeroUpdatesBatchNormStatistics) {
  expect_only_replica_zero_updates_batch_norm(on_gpu(2));
}

TEST(DataParallelCuda, GradModeReachesTheReplicas) { expect_grad_mode_reaches_two_replicas(on_gpu(2)); }

TEST(DataParallelCuda, DropoutMasksFollowTheSeed) { expect_dropout_masks_follow_the_seed(on_gpu(3)); }

TEST(DataParallelCuda, AnErrorInAReplicaReachesTheCaller) {
  auto model = std::make_shared<PicksyLinear>();
  model->to(gpu());
  DataParallel parallel(model, on_gpu(4));
  const cuda::StreamHandle caller_stream = cuda::current_stream(gpu());
  expect_error([&] { parallel(ones({13, 2})); }, "replica 3 on cuda:0 failed: PicksyLinear: expected more than one row");
  // Every thread the replicas ran on put its stream back, the failing one too: GCC's OpenMP
  // runs the next region of four threads on the same threads, and each finds Lockstep's own
  // stream (with fresh threads the check could only pass, never fail wrongly).
  for (const cuda::StreamHandle stream : streams_of_a_team_of(4)) EXPECT_EQ(stream, caller_stream);
  // The wrapper still works after the error, and agrees with the CPU.
  const Tensor x = random_cpu({12, 2}, 13);
  const Tensor out = parallel(x);
  model->to(Device::cpu());
  expect_close((*model)(x), out, 1e-5, 1e-6, "output after the error");
}

TEST(DataParallelCuda, TheModuleMustBeOnTheGpu) {
  DataParallel parallel(std::make_shared<Linear>(3, 2), on_gpu(2));
  expect_error([&] { parallel(ones({4, 3})); }, "but 'weight' is on cpu: call model->to(cuda:0)");
}
