// Layers and initialisation: PyTorch's default init (bounds, spread, seeding), what each layer
// computes compared with a hand-written reference, BatchNorm2d's running statistics, Dropout
// in train and eval, Sequential, CrossEntropyLoss, and a finite-difference check of gradients
// through the Module API.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Checks that every value lies in [-bound, bound] and that their spread is that of a uniform
// distribution on it: standard deviation bound / sqrt(3), within `tolerance` (relative).
void expect_uniform(const Tensor& t, double bound, double tolerance) {
  const std::vector<double> v = t.to_vector<double>();
  double sum_sq = 0.0, sum = 0.0, largest = 0.0;
  for (double x : v) {
    ASSERT_LE(std::fabs(x), bound);
    sum += x;
    sum_sq += x * x;
    largest = std::max(largest, std::fabs(x));
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), bound / std::sqrt(3.0), tolerance * bound / std::sqrt(3.0));
  EXPECT_GT(largest, 0.9 * bound);  // the whole range is used, not just the middle
}

}  // namespace

// ---- init ----------------------------------------------------------------------------------

TEST(Init, FanInCountsInputsPerOutput) {
  EXPECT_EQ(fan_in(empty({256, 784})), 784);
  EXPECT_EQ(fan_in(empty({64, 32, 3, 3})), 288);
  expect_error([] { fan_in(empty({5})); }, "fan_in: expected a weight with at least 2 dimensions (out, in, ...), got shape [5]");
}

TEST(Init, KaimingUniformUsesPyTorchsBound) {
  // a = 0 (ReLU): bound = sqrt(2) * sqrt(3 / fan_in) = sqrt(6 / 100).
  Generator g(3);
  Tensor w = empty({400, 100});
  kaiming_uniform_(w, 0.0, &g);
  expect_uniform(w, std::sqrt(6.0 / 100.0), 0.02);
  // a = sqrt(5), the layers' default: bound = 1 / sqrt(fan_in).
  kaiming_uniform_(w, std::sqrt(5.0), &g);
  expect_uniform(w, 0.1, 0.02);
}

TEST(Init, UniformZerosOnesFillInPlace) {
  Generator g(5);
  Tensor t = empty({10000}, TensorOptions().dtype(DType::f64));
  EXPECT_TRUE(&uniform_(t, 2.0, 3.0, &g) == &t);
  const std::vector<double> v = t.to_vector<double>();
  for (double x : v) ASSERT_TRUE(x >= 2.0 && x < 3.0);
  EXPECT_NEAR(mean(t).item(), 2.5, 0.01);
  EXPECT_EQ(sum(zeros_(t)).item(), 0.0);
  EXPECT_EQ(sum(ones_(t)).item(), 10000.0);
  // Parameters (leaves requiring grad) can be re-initialised: init works without recording.
  Linear lin(3, 2);
  ones_(lin.weight);
  EXPECT_EQ(sum(lin.weight).item(), 6.0);
  expect_error([&] { uniform_(t, 1.0, 0.0); }, "uniform_: expected lo <= hi, got lo = 1 and hi = 0");
}

TEST(Init, LinearAndConv2dDefaultsStayWithinOneOverSqrtFanIn) {
  Linear lin(784, 256);
  expect_uniform(lin.weight, 1.0 / std::sqrt(784.0), 0.02);
  expect_uniform(lin.bias, 1.0 / std::sqrt(784.0), 0.15);  // only 256 values: a looser spread check
  Conv2d conv(32, 64, 3);
  expect_uniform(conv.weight, 1.0 / std::sqrt(288.0), 0.02);
  for (double b : conv.bias.to_vector<double>()) EXPECT_LE(std::fabs(b), 1.0 / std::sqrt(288.0));
}

TEST(Init, SameSeedSameModel) {
  manual_seed(7);
  Linear a(20, 10);
  Conv2d ca(3, 4, 3);
  manual_seed(7);
  Linear b(20, 10);
  Conv2d cb(3, 4, 3);
  EXPECT_EQ(a.weight.to_vector<float>(), b.weight.to_vector<float>());
  EXPECT_EQ(a.bias.to_vector<float>(), b.bias.to_vector<float>());
  EXPECT_EQ(ca.weight.to_vector<float>(), cb.weight.to_vector<float>());
  manual_seed(8);
  Linear c(20, 10);
  EXPECT_NE(a.weight.to_vector<float>(), c.weight.to_vector<float>());
  // An explicit generator gives the same draws as a freshly seeded default one.
  Generator g(7);
  c.reset_parameters(&g);
  EXPECT_EQ(a.weight.to_vector<float>(), c.weight.to_vector<float>());
}

TEST(Init, SkipInitGuardDrawsNothing) {
  manual_seed(4);
  const auto expected = rand({5}).to_vector<float>();
  manual_seed(4);
  const Tensor filled = full({3}, 2.0);
  {
    const SkipInitGuard skip;
    { const SkipInitGuard nested; }  // an inner guard leaves the outer one in force
    Linear linear(20, 10);
    Conv2d conv(Conv2dOptions(3, 4, 3).bias(false));
    uniform_(filled, -1.0, 1.0);
  }
  EXPECT_EQ(filled.to_vector<float>(), (std::vector<float>{2, 2, 2}));  // left as it was
  EXPECT_EQ(rand({5}).to_vector<float>(), expected);
  // Once the guard is gone, layers draw again.
  manual_seed(4);
  Linear drawn(20, 10);
  EXPECT_NE(rand({5}).to_vector<float>(), expected);
}

// ---- layers --------------------------------------------------------------------------------

TEST(Layers, LinearComputesXWTransposePlusB) {
  Linear lin(3, 2);
  {
    NoGradGuard no_grad;
    lin.weight.copy_(from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
    lin.bias.copy_(from_vector({0.5, -1}, {2}));
  }
  // [1, 0, -1] . [1, 2, 3] + 0.5 = -1.5;  [1, 0, -1] . [4, 5, 6] - 1 = -3
  EXPECT_EQ(lin(from_vector({1, 0, -1}, {1, 3})).to_vector<float>(), (std::vector<float>{-1.5f, -3.0f}));
  Linear no_bias(3, 2, false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias.parameters().size(), 1u);
  EXPECT_EQ(no_bias(ones({4, 5, 3})).shape(), (Shape{4, 5, 2}));
  expect_error([&] { lin(ones({4, 5})); }, "Linear: expected input of shape (..., 3), got [4, 5]");
  expect_error([] { Linear(0, 3); }, "Linear: expected positive in_features and out_features, got 0 and 3");
}

TEST(Layers, Conv2dMatchesTheOpAndItsShape) {
  manual_seed(1);
  Conv2d conv(Conv2dOptions(2, 3, 3).stride(2).padding(1));
  EXPECT_EQ(conv.weight.shape(), (Shape{3, 2, 3, 3}));
  EXPECT_EQ(conv.bias.shape(), (Shape{3}));
  const Tensor x = rand({2, 2, 7, 7});
  const Tensor y = conv(x);
  // (7 + 2 - 3) / 2 + 1 = 4
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(y.to_vector<float>(), conv2d(x, conv.weight, conv.bias, 2, 1).to_vector<float>());
  EXPECT_EQ(Conv2d(Conv2dOptions(2, 3, 1).bias(false)).parameters().size(), 1u);
  expect_error([&] { conv(rand({2, 3, 7, 7})); }, "Conv2d: expected input of shape (N, 2, H, W), got [2, 3, 7, 7]");
}

TEST(Layers, BatchNorm2dUpdatesRunningStatsOnlyInTraining) {
  BatchNorm2d bn(2);
  EXPECT_EQ(bn.running_mean.to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(bn.running_var.to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(bn.num_batches_tracked.dim(), 0);
  // x: (N=2, C=2, 1, 2). Channel 0 holds 1, 2, 3, 4 (mean 2.5, unbiased var 5/3);
  // channel 1 holds 10, 10, 10, 14 (mean 11, unbiased var 4).
  const Tensor x = from_vector({1, 2, 10, 10, 3, 4, 10, 14}, {2, 2, 1, 2}, TensorOptions().dtype(DType::f64));
  bn.to(DType::f64);
  const Tensor y = bn(x);
  // running = 0.9 * running + 0.1 * batch statistic
  const std::vector<double> rm = bn.running_mean.to_vector<double>();
  const std::vector<double> rv = bn.running_var.to_vector<double>();
  EXPECT_NEAR(rm[0], 0.25, 1e-12);
  EXPECT_NEAR(rm[1], 1.1, 1e-12);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-12);
  EXPECT_NEAR(rv[1], 0.9 + 0.1 * 4.0, 1e-12);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // Training output uses the batch's biased variance: channel 0 element 1 -> (1 - 2.5) / sqrt(1.25 + eps).
  EXPECT_NEAR(y.to_vector<double>()[0], -1.5 / std::sqrt(1.25 + 1e-5), 1e-9);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);

  // Evaluation: the running statistics normalise, and nothing is updated.
  bn.eval();
  const std::vector<double> rm_before = bn.running_mean.to_vector<double>();
  const std::vector<double> rv_before = bn.running_var.to_vector<double>();
  const std::vector<double> out = bn(x).to_vector<double>();
  EXPECT_EQ(bn.running_mean.to_vector<double>(), rm_before);
  EXPECT_EQ(bn.running_var.to_vector<double>(), rv_before);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  EXPECT_NEAR(out[0], (1.0 - rm_before[0]) / std::sqrt(rv_before[0] + 1e-5), 1e-12);
  EXPECT_NEAR(out[3], (10.0 - rm_before[1]) / std::sqrt(rv_before[1] + 1e-5), 1e-12);

  expect_error([&] { bn(ones({2, 2}, TensorOptions().dtype(DType::f64))); },
               "BatchNorm2d: expected 4D input (N, C, H, W), got 2D input of shape [2, 2]");
  expect_error([&] { bn(ones({2, 3, 1, 1}, TensorOptions().dtype(DType::f64))); },
               "BatchNorm2d: expected 2 channels, got input of shape [2, 3, 1, 1]");
}

TEST(Layers, DropoutOnlyActsInTraining) {
  Dropout drop(0.5);
  const Tensor x = ones({1000});
  const std::vector<float> y = drop(x).to_vector<float>();
  int zeros_seen = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || v == 2.0f);  // dropped, or kept and scaled by 1 / (1 - p)
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  drop.eval();
  EXPECT_EQ(drop(x).to_vector<float>(), std::vector<float>(1000, 1.0f));
  expect_error([] { Dropout(1.5); }, "Dropout: the probability p has to be between 0 and 1, got 1.5");
}

TEST(Layers, ReLUMaxPoolFlatten) {
  ReLU relu_layer;
  EXPECT_EQ(relu_layer(from_vector({-1, 0, 2}, {3})).to_vector<float>(), (std::vector<float>{0, 0, 2}));
  // ReLU(true) writes over its input, and keeps the setting when DataParallel copies it.
  ReLU in_place(true);
  const Tensor input = from_vector({-1, 0, 2}, {3});
  const Tensor output = in_place(input);
  EXPECT_EQ(output.storage(), input.storage());
  EXPECT_EQ(input.to_vector<float>(), (std::vector<float>{0, 0, 2}));
  EXPECT_EQ(in_place.str(), "ReLU(inplace=True)");
  EXPECT_EQ(in_place.clone_structure()->str(), "ReLU(inplace=True)");
  EXPECT_EQ(relu_layer.str(), "ReLU()");
  MaxPool2d pool(2);
  EXPECT_EQ(pool.stride, 2);  // stride 0 means kernel_size
  const Tensor x = arange(0, 16).reshape({1, 1, 4, 4});
  EXPECT_EQ(pool(x).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(MaxPool2d(3, 1, 1)(x).shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(Flatten()(ones({2, 3, 4, 5})).shape(), (Shape{2, 60}));
  EXPECT_EQ(Flatten(0, 1)(ones({2, 3, 4})).shape(), (Shape{6, 4}));
  expect_error([] { MaxPool2d(0); }, "MaxPool2d: expected kernel_size > 0");
}

TEST(Layers, SequentialChainsItsModules) {
  auto lin = std::make_shared<Linear>(3, 2);
  Sequential seq;
  EXPECT_EQ(seq.size(), 0u);
  seq.push_back(lin);
  seq.push_back(std::make_shared<ReLU>());
  EXPECT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq[0], lin);
  const Tensor x = rand({4, 3}) - 0.5;
  EXPECT_EQ(seq(x).to_vector<float>(), relu((*lin)(x)).to_vector<float>());
  EXPECT_EQ(Sequential()(x).to_vector<float>(), x.to_vector<float>());  // empty: the identity
  expect_error([&] { seq[2]; }, "Sequential: index 2 is out of range for a Sequential of 2 modules");
}

TEST(Layers, CrossEntropyLossIsTheMeanNegativeLogLikelihood) {
  CrossEntropyLoss criterion;
  // Equal scores for 4 classes: -log(1/4) on every row.
  EXPECT_NEAR(criterion(zeros({3, 4}), from_vector(std::vector<int64_t>{0, 1, 3}, {3})).item(), std::log(4.0), 1e-6);
  // Row scores [0, ln 3]: softmax [1/4, 3/4]; targets 1 and 0 -> mean(-ln(3/4), -ln(1/4)).
  const Tensor logits = from_vector({0, std::log(3.0), 0, std::log(3.0)}, {2, 2}, TensorOptions().dtype(DType::f64));
  EXPECT_NEAR(criterion(logits, from_vector(std::vector<int64_t>{1, 0}, {2})).item(), (std::log(4.0 / 3.0) + std::log(4.0)) / 2, 1e-12);
}

// ---- gradients through modules -------------------------------------------------------------

TEST(Layers, GradientsThroughASequentialMatchFiniteDifferences) {
  // Sequential(Linear(3, 4), ReLU, Linear(4, 2)) in f64.
  manual_seed(11);
  Sequential net(std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(), std::make_shared<Linear>(4, 2));
  net.to(DType::f64);
  const Tensor x = test::random_input({5, 3}, 21);

  // With respect to the input, with the parameters fixed.
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return net(in[0]); }, {x}));

  // With respect to every parameter: L = sum(net(x) * w), perturbing each parameter in place.
  const Tensor w = test::random_input({5, 2}, 22, false);
  const Tensor input = x.detach();
  auto loss = [&] { return sum(net(input) * w); };
  net.zero_grad();
  loss().backward();
  NoGradGuard no_grad;
  for (const auto& [name, p] : net.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const std::vector<double> analytic = p.grad().to_vector<double>();
    double* data = p.data_ptr<double>();
    const double eps = 1e-6;
    for (int64_t i = 0; i < p.numel(); ++i) {
      const double saved = data[i];
      data[i] = saved + eps;
      const double plus = loss().item();
      data[i] = saved - eps;
      const double minus = loss().item();
      data[i] = saved;
      EXPECT_NEAR(analytic[i], (plus - minus) / (2 * eps), 1e-6) << name << " element " << i;
    }
  }
}
