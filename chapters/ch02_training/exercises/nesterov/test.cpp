// Exercise ch02_nesterov: the test of the student's NesterovSGD (starter.cpp or the file given
// with FILE=...): PyTorch's rule on numbers worked out by hand, then the library's
// SGD(nesterov=true) on random parameters and gradients, step after step.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "lockstep.h"

namespace exercise {
/// An optimiser applying torch.optim.SGD's rule with nesterov=True to `params` (the student's).
std::unique_ptr<lockstep::Optimizer> make_nesterov_sgd(std::vector<lockstep::Tensor> params, double lr, double momentum,
                                                       double weight_decay);
}  // namespace exercise

namespace lockstep {
namespace {

const TensorOptions kF64 = TensorOptions().dtype(DType::f64);

// One parameter p = 1 whose gradient is always 0.5, lr 0.1, momentum 0.9, no weight decay:
//   step 1: buf = 0.5;                   d = 0.5 + 0.9 * 0.5  = 0.95;  p = 1 - 0.095      = 0.905
//   step 2: buf = 0.9 * 0.5 + 0.5 = 0.95; d = 0.5 + 0.9 * 0.95 = 1.355; p = 0.905 - 0.1355 = 0.7695
// (plain momentum would give p = 0.95 after step 1: Nesterov looks one step further ahead).
TEST(NesterovSGD, FollowsPyTorchsRuleOnNumbersWorkedOutByHand) {
  const Tensor p = ones({1}, kF64).requires_grad_(true);
  std::unique_ptr<Optimizer> optimizer = exercise::make_nesterov_sgd({p}, 0.1, 0.9, 0.0);
  const std::vector<double> expected = {0.905, 0.7695};
  for (double after_step : expected) {
    p.set_grad(full({1}, 0.5, kF64));
    optimizer->step();
    EXPECT_NEAR(p.item(), after_step, 1e-12);
  }
}

// With weight decay 0.1 on p = 2, gradient 0: d = 0.2; buf = 0.2; p = 2 - 0.1 * (0.2 + 0.18) = 1.962.
TEST(NesterovSGD, AddsWeightDecayToTheGradient) {
  const Tensor p = full({1}, 2.0, kF64).requires_grad_(true);
  std::unique_ptr<Optimizer> optimizer = exercise::make_nesterov_sgd({p}, 0.1, 0.9, 0.1);
  p.set_grad(zeros({1}, kF64));
  optimizer->step();
  EXPECT_NEAR(p.item(), 1.962, 1e-12);
}

TEST(NesterovSGD, MatchesTheLibrarysSGDOverFiveSteps) {
  Generator g(7);
  const Tensor start = randn({3, 4}, kF64, &g);
  const Tensor mine = start.clone().requires_grad_(true);
  const Tensor reference = start.clone().requires_grad_(true);
  std::unique_ptr<Optimizer> optimizer = exercise::make_nesterov_sgd({mine}, 0.05, 0.9, 1e-3);
  SGD sgd({reference}, SGDOptions(0.05).momentum(0.9).weight_decay(1e-3).nesterov(true));
  for (int step = 0; step < 5; ++step) {
    const Tensor grad = randn({3, 4}, kF64, &g);
    mine.set_grad(grad.clone());
    reference.set_grad(grad.clone());
    optimizer->step();
    sgd.step();
    const std::vector<double> a = mine.to_vector<double>(), b = reference.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-12) << "step " << step + 1 << ", element " << i;
    ASSERT_TRUE(optimizer->has_state(0, "momentum_buffer")) << "keep the buffer as state \"momentum_buffer\"";
    const std::vector<double> buf = optimizer->state(0, "momentum_buffer").to_vector<double>();
    const std::vector<double> reference_buf = sgd.state(0, "momentum_buffer").to_vector<double>();
    for (size_t i = 0; i < buf.size(); ++i) ASSERT_NEAR(buf[i], reference_buf[i], 1e-12) << "momentum buffer, step " << step + 1;
  }
}

}  // namespace
}  // namespace lockstep
