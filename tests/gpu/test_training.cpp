// Training on the GPU follows training on the CPU. Every kernel has its own parity test; this
// one checks that they compose: chapter 2's models trained for 30 SGD steps (momentum and
// weight decay) from the same weights on the same batches, forward, backward and the
// optimizer's state, on both devices.
//
// Why f64, and why not f32: in f32 a small difference does not stay small. On the CPU alone,
// scaling the initial weights by (1 + 1e-5) in f32 moves a parameter after 30 of these steps by up
// to 1.8% of its norm for the CNN and 18% for the ResNet, where the MLP keeps a 1.8e-5 difference.
// In f64 every model stays linear: a 1e-12 nudge ends as 1.8e-12 (MLP), 1.6e-12 (CNN) and 2.4e-12
// (ResNet) after 30 steps. The two devices add in different orders, about 1e-16 apart per operation
// in f64, so their trajectories should stay within about 1e-13 of each other, while a kernel that
// computed in f32 somewhere (1e-7) or got any rule wrong would be off by far more than the
// tolerance below. This is also why one f32 run of chapter 2 on each device is not expected to
// reach the same accuracy to the digit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// A model after training, and its loss at each step.
struct Trajectory {
  std::shared_ptr<Module> model;
  std::vector<double> losses;
};

// Trains `name` in f64 on `device` for `steps` steps, from the weights seed 5 gives, on random
// batches: 32 Fashion-MNIST-shaped images (1, 28, 28) for mlp and cnn, 16 CIFAR-shaped ones
// (3, 32, 32) for resnet.
Trajectory train(const std::string& name, Device device, int steps) {
  Trajectory t;
  t.model = f64_model(name, device, 5);
  SGD sgd(t.model->parameters(), SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  const Shape input_shape = name == "resnet" ? Shape{16, 3, 32, 32} : Shape{32, 1, 28, 28};
  for (int step = 0; step < steps; ++step) {
    const Tensor x = random_cpu(input_shape, 100 + static_cast<uint64_t>(step), DType::f64).to(device);
    const Tensor y = class_labels(input_shape[0], step).to(device);
    sgd.zero_grad();
    const Tensor loss = cross_entropy((*t.model)(x), y);
    loss.backward();
    sgd.step();
    t.losses.push_back(loss.item());
  }
  return t;
}

}  // namespace

TEST(TrainingGpu, ThirtyStepsOfEveryModelFollowTheCpuInF64) {
  const int steps = 30;
  for (const std::string name : {"mlp", "cnn", "resnet"}) {
    const Trajectory cpu = train(name, Device::cpu(), steps);
    const Trajectory cuda = train(name, gpu(), steps);
    for (int step = 0; step < steps; ++step) {
      EXPECT_NEAR(cuda.losses[step], cpu.losses[step], 1e-10 * std::abs(cpu.losses[step]))
          << name << ": the loss of step " << step << " differs";
    }
    expect_same_named_tensors(cpu.model->named_parameters(), cuda.model->named_parameters(), name + " after 30 steps");
    // The ResNet's BatchNorm statistics: running mean and variance, and the batch count.
    expect_same_named_tensors(cpu.model->named_buffers(), cuda.model->named_buffers(), name + " after 30 steps");
  }
}
