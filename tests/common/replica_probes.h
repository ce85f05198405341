// Small modules that let a DataParallel test see what happened inside its replicas. The unit
// tests run them on CPU replicas, the GPU tests on replicas sharing one GPU, so that both check
// the same rules on different devices.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "lockstep.h"

namespace lockstep::test {

/// `n` replicas, all on the CPU.
inline std::vector<Device> cpus(int n) { return std::vector<Device>(static_cast<size_t>(n), Device::cpu()); }

/// Notes the grad mode of the thread that runs its forward pass: a replica whose input's first
/// element is i writes slot i of the shared vector (1: grad mode on, 0: off).
class GradModeSpy : public Module {
 public:
  /// `seen` has one slot per replica.
  explicit GradModeSpy(std::shared_ptr<std::vector<int>> seen) : seen_(std::move(seen)) {}
  /// Records the mode and returns the input unchanged.
  Tensor forward(const Tensor& input) override {
    const auto slot = static_cast<size_t>(input.to(Device::cpu()).to_vector<float>()[0]);
    (*seen_)[slot] = grad_mode_enabled() ? 1 : 0;
    return input;
  }
  /// Replicas write into the same vector as the original.
  std::shared_ptr<Module> clone_structure() const override { return std::make_shared<GradModeSpy>(seen_); }

 private:
  std::shared_ptr<std::vector<int>> seen_;
};

/// A Linear(2, 2) that fails on a chunk of one row: 13 rows on 4 devices are 4, 4, 4, 1, so
/// replica 3 throws "PicksyLinear: expected more than one row".
class PicksyLinear : public Linear {
 public:
  PicksyLinear() : Linear(2, 2) {}
  /// Throws on a single row, otherwise Linear's forward.
  Tensor forward(const Tensor& input) override {
    LOCKSTEP_CHECK(input.size(0) > 1, "PicksyLinear: expected more than one row");
    return Linear::forward(input);
  }
  /// A new PicksyLinear, so that the replicas fail the same way.
  std::shared_ptr<Module> clone_structure() const override { return std::make_shared<PicksyLinear>(); }
};

/// Expects both replicas on `devices` (two of them) to run their forward pass in the caller's
/// grad mode, on and then off, and the caller's mode to be left as it was.
inline void expect_grad_mode_reaches_two_replicas(const std::vector<Device>& devices) {
  auto seen = std::make_shared<std::vector<int>>(2, -1);
  DataParallel parallel(std::make_shared<GradModeSpy>(seen), devices);
  const Tensor rows = from_vector({0, 1}, {2, 1});  // row i goes to replica i, which writes seen[i]
  parallel(rows);
  EXPECT_EQ(*seen, (std::vector<int>{1, 1}));
  {
    NoGradGuard no_grad;
    parallel(rows);
    EXPECT_EQ(*seen, (std::vector<int>{0, 0}));
  }
  EXPECT_TRUE(grad_mode_enabled());  // the caller's own mode is back
}

/// Expects a BatchNorm2d(3) wrapped in DataParallel over two `devices` to keep the running
/// statistics of replica 0's chunk (the first 4 of 8 rows) only, counting one batch, as
/// PyTorch's DataParallel does.
inline void expect_only_replica_zero_updates_batch_norm(const std::vector<Device>& devices) {
  auto norm = std::make_shared<BatchNorm2d>(3);
  norm->to(devices[0]);
  DataParallel parallel(norm, devices);
  manual_seed(12);
  const Tensor x = randn({8, 3, 4, 4});
  parallel(x);
  BatchNorm2d reference(3);
  reference(x.slice(0, 0, 4));
  for (const auto& [name, expected, actual] : {std::tuple{"running_mean", reference.running_mean, norm->running_mean},
                                               std::tuple{"running_var", reference.running_var, norm->running_var}}) {
    const auto e = expected.to_vector<double>(), a = actual.to(Device::cpu()).to_vector<double>();
    for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-6 * (1 + std::abs(e[i]))) << name << " element " << i;
  }
  EXPECT_EQ(norm->num_batches_tracked.item(), 1.0);
}

/// Ones (30, 8) through Dropout(0.5) on replicas on `devices`, after manual_seed(9); the result
/// on the CPU.
inline std::vector<float> dropout_through_replicas(const std::vector<Device>& devices) {
  manual_seed(9);
  DataParallel parallel(std::make_shared<Dropout>(0.5), devices);
  return parallel(ones({30, 8})).to(Device::cpu()).to_vector<float>();
}

/// Expects dropout on three replicas on `devices` (10 rows each) to draw the same masks on every
/// run from the same seed (each replica has its own generator, seeded in order from the default
/// one), and different masks on different replicas.
inline void expect_dropout_masks_follow_the_seed(const std::vector<Device>& devices) {
  const auto first = dropout_through_replicas(devices);
  for (int run = 0; run < 3; ++run) EXPECT_EQ(dropout_through_replicas(devices), first) << "run " << run;
  EXPECT_NE(std::vector<float>(first.begin(), first.begin() + 80), std::vector<float>(first.begin() + 80, first.begin() + 160));
}

}  // namespace lockstep::test
