// CUDA graphs (core/cuda/graph.h) and the chapters' graphed training step
// (chapters/common/graphed_step.h): a capture runs nothing, a replay repeats the recorded work
// on whatever the static inputs hold, the graph's memory stays out of other work's reach until
// reset, a capture that waits for the GPU fails and leaves the stream usable, and a training
// step replayed from a graph follows the same steps run eagerly.
#include <gtest/gtest.h>

#include <string>

#include "../unit/test_util.h"
#include "common/graphed_step.h"
#include "core/flop_count.h"
#include "gpu_test_util.h"

namespace lockstep::test {
namespace {

TEST(CUDAGraph, CapturingRunsNothingAndEachReplayRunsTheWorkOnce) {
  SKIP_WITHOUT_CACHING();
  const Tensor counter = zeros({4}, TensorOptions().device(gpu()));
  cuda::CUDAGraph graph;
  graph.capture(gpu(), [&] { counter.add_(ones({4}, TensorOptions().device(gpu()))); });
  EXPECT_TRUE(graph.captured());
  EXPECT_EQ(counter.to(Device::cpu()).to_vector<float>(), std::vector<float>(4, 0.0f));
  graph.replay();
  graph.replay();
  EXPECT_EQ(counter.to(Device::cpu()).to_vector<float>(), std::vector<float>(4, 2.0f));
}

TEST(CUDAGraph, AReplayReadsWhatTheStaticInputHoldsNow) {
  SKIP_WITHOUT_CACHING();
  const Tensor x = random_cpu({64, 32}, 1).to(gpu());
  const Tensor w = random_cpu({32, 16}, 2).to(gpu());
  // Once eagerly first: the stream's cuBLAS handle is made on first use, which no capture may do.
  Tensor y = relu(matmul(x, w)) * 2.0;
  cuda::CUDAGraph graph;
  graph.capture(gpu(), [&] { y = relu(matmul(x, w)) * 2.0; });
  for (uint64_t seed = 10; seed < 13; ++seed) {
    const Tensor batch = random_cpu({64, 32}, seed);
    x.copy_(batch.to(gpu()));
    graph.replay();
    expect_close(relu(matmul(batch, w.to(Device::cpu()))) * 2.0, y, 1e-5, 1e-6, "replay " + std::to_string(seed));
  }
}

TEST(CUDAGraph, ItsBlocksGoToNoOtherWorkUntilReset) {
  SKIP_WITHOUT_CACHING();
  const Device device = gpu();
  const Tensor x = random_cpu({1 << 16}, 3).to(device);
  void* scratch = nullptr;
  Tensor y;
  cuda::CUDAGraph graph;
  graph.capture(device, [&] {
    // Freed inside the capture, yet every replay writes it again.
    const Tensor t = x * 3.0;
    scratch = t.data();
    y = t + 1.0;
  });
  {
    const Tensor other = empty({1 << 16}, TensorOptions().device(device));
    EXPECT_NE(other.data(), scratch) << "an eager allocation got a block the graph's replays write";
  }
  graph.reset();
  EXPECT_FALSE(graph.captured());
  // Back in the shared cache, last freed: the next allocation of its size is that block.
  const Tensor again = empty({1 << 16}, TensorOptions().device(device));
  EXPECT_EQ(again.data(), scratch);
  // The capture's output outlives the graph as an ordinary tensor.
  EXPECT_EQ(y.shape(), Shape{1 << 16});
}

TEST(CUDAGraph, AnotherGraphsOutputFreedDuringACaptureIsHeldForItsReplays) {
  SKIP_WITHOUT_CACHING();
  const Device device = gpu();
  const Tensor x = random_cpu({1 << 16}, 4).to(device);
  Tensor y, z;
  cuda::CUDAGraph first, second;
  first.capture(device, [&] { y = x * 2.0; });
  void* y_block = y.data();
  // The second graph reads the first one's output and drops the last reference to it.
  second.capture(device, [&] {
    z = y + 1.0;
    y = Tensor();
  });
  first.reset();
  {
    const Tensor other = empty({1 << 16}, TensorOptions().device(device));
    EXPECT_NE(other.data(), y_block) << "eager work got a block the second graph's replays read";
  }
  second.reset();
  const Tensor again = empty({1 << 16}, TensorOptions().device(device));
  EXPECT_EQ(again.data(), y_block) << "the held block did not come back at the second graph's reset";
}

TEST(CUDAGraph, ACaptureThatWaitsForTheGpuFailsAndLeavesTheStreamUsable) {
  SKIP_WITHOUT_CACHING();
  const Tensor x = ones({8}, TensorOptions().device(gpu()));
  cuda::CUDAGraph graph;
  expect_error([&] { graph.capture(gpu(), [&] { (void)sum(x).item(); }); }, "capturing a CUDA graph on cuda:0 failed");
  EXPECT_FALSE(graph.captured());
  EXPECT_EQ(sum(x * 2.0).item(), 16.0);
}

TEST(CUDAGraph, EachReplayCountsTheCapturedFlops) {
  SKIP_WITHOUT_CACHING();
  const Tensor a = random_cpu({32, 64}, 4).to(gpu()), b = random_cpu({64, 8}, 5).to(gpu());
  Tensor c = matmul(a, b);  // once eagerly, for the stream's cuBLAS handle
  cuda::CUDAGraph graph;
  const int64_t before = flops_counted();
  graph.capture(gpu(), [&] { c = matmul(a, b); });
  EXPECT_EQ(flops_counted(), before) << "a capture runs nothing, so it counts nothing";
  EXPECT_EQ(graph.flops_per_replay(), 2 * 32 * 64 * 8);
  graph.replay();
  graph.replay();
  EXPECT_EQ(flops_counted(), before + 2 * graph.flops_per_replay());
}

TEST(CUDAGraph, RefusesASecondCaptureAndAReplayOfNothing) {
  SKIP_WITHOUT_CACHING();
  cuda::CUDAGraph graph;
  expect_error([&] { graph.replay(); }, "nothing was captured");
  const Tensor x = zeros({2}, TensorOptions().device(gpu()));
  graph.capture(gpu(), [&] { x.add_(ones({2}, TensorOptions().device(gpu()))); });
  expect_error([&] { graph.capture(gpu(), [&] { x.add_(ones({2}, TensorOptions().device(gpu()))); }); }, "reset() it before capturing again");
}

// Chapter 2's step on its CNN, in f64 so that both runs can be compared to the last digit: the
// replays run the kernels the eager steps run, on the same values.
TEST(GraphedStep, ReplayedStepsFollowTheEagerStepsOfTheSameBatches) {
  SKIP_WITHOUT_CACHING();
  const int steps = 8;
  auto run = [&](bool graphed) {
    std::shared_ptr<Module> model = f64_model("cnn", gpu(), 7);
    SGD sgd(model->parameters(), SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
    const GraphedStep::Step step = [&](const Tensor& x, const Tensor& y) {
      const Tensor loss = cross_entropy((*model)(x), y);
      sgd.zero_grad();
      loss.backward();
      sgd.step();
      return loss;
    };
    GraphedStep graph_step(step, 2);
    std::vector<double> losses;
    for (int i = 0; i < steps; ++i) {
      // The last batch is smaller: it runs eagerly beside the graph.
      const int64_t n = i == steps - 1 ? 20 : 32;
      const Tensor x = random_cpu({n, 1, 28, 28}, 200 + static_cast<uint64_t>(i), DType::f64).to(gpu());
      const Tensor y = class_labels(n, i).to(gpu());
      losses.push_back((graphed ? graph_step(x, y) : step(x, y)).item());
    }
    EXPECT_EQ(graph_step.replays(), graphed ? steps - 3 : 0);
    return std::make_pair(model, losses);
  };
  const auto eager = run(false), replayed = run(true);
  EXPECT_EQ(replayed.second, eager.second);
  const auto e = eager.first->named_parameters(), r = replayed.first->named_parameters();
  for (size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(r[i].second.to(Device::cpu()).to_vector<double>(), e[i].second.to(Device::cpu()).to_vector<double>())
        << e[i].first << " differs after " << steps << " steps";
  }
}

}  // namespace
}  // namespace lockstep::test
