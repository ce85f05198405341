// batch_norm: normalised statistics, the running-statistics update PyTorch performs (by hand),
// eval mode, finite-difference gradients in training and eval mode, and the errors for bad
// shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

const TensorOptions f64 = TensorOptions().dtype(DType::f64);

// The values of channel c of an (N, C, H, W) or (N, C) tensor.
std::vector<double> channel(const Tensor& t, int64_t c) {
  const std::vector<double> all = t.to_vector<double>();
  const int64_t C = t.size(1), S = t.numel() / (t.size(0) * C);
  std::vector<double> out;
  for (int64_t n = 0; n < t.size(0); ++n) {
    for (int64_t s = 0; s < S; ++s) out.push_back(all[(n * C + c) * S + s]);
  }
  return out;
}

double mean_of(const std::vector<double>& v) {
  double total = 0.0;
  for (double x : v) total += x;
  return total / static_cast<double>(v.size());
}

// Biased variance (divide by n).
double var_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double total = 0.0;
  for (double x : v) total += (x - m) * (x - m);
  return total / static_cast<double>(v.size());
}

}  // namespace

TEST(BatchNorm, TrainingNormalisesEachChannel) {
  // Channels with very different means and spreads all come out with mean 0 and variance 1.
  const Tensor x = randn({8, 3, 5, 4}) * 4.0 + 10.0;
  const Tensor out = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_EQ(out.shape(), x.shape());
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(mean_of(channel(out, c)), 0.0, 1e-5);
    EXPECT_NEAR(var_of(channel(out, c)), 1.0, 1e-4);  // eps = 1e-5 keeps it just below 1
  }
  // weight and bias then scale and shift every channel.
  const Tensor w = from_vector({2, 0.5, -1}, {3}), b = from_vector({1, -3, 0}, {3});
  const Tensor affine = batch_norm(x, Tensor(), Tensor(), w, b, true);
  const double expected_mean[] = {1, -3, 0}, expected_var[] = {4, 0.25, 1};
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(mean_of(channel(affine, c)), expected_mean[c], 1e-5);
    EXPECT_NEAR(var_of(channel(affine, c)), expected_var[c], 1e-4);
  }
}

TEST(BatchNorm, HandComputed2D) {
  // Channel 0 holds 1, 3, 5, 7: mean 4, biased variance 5, unbiased 20/3.
  // Channel 1 holds 2, 6, 10, 14: mean 8, biased variance 20, unbiased 80/3.
  const Tensor x = from_vector({1, 2, 3, 6, 5, 10, 7, 14}, {4, 2}, f64);
  const Tensor running_mean = from_vector({0.5, -1}, {2}, f64);
  const Tensor running_var = from_vector({2, 3}, {2}, f64);
  const Tensor w = from_vector({2, 3}, {2}, f64), b = from_vector({0.5, -0.5}, {2}, f64);
  const double eps = 1e-5, momentum = 0.1;
  const Tensor out = batch_norm(x, running_mean, running_var, w, b, true, momentum, eps);
  const std::vector<double> o = out.to_vector<double>();
  EXPECT_NEAR(o[0], (1 - 4) / std::sqrt(5 + eps) * 2 + 0.5, 1e-12);
  EXPECT_NEAR(o[7], (14 - 8) / std::sqrt(20 + eps) * 3 - 0.5, 1e-12);

  // PyTorch's update: running = (1 - momentum) * running + momentum * batch, with the
  // UNBIASED batch variance.
  const std::vector<double> rm = running_mean.to_vector<double>(), rv = running_var.to_vector<double>();
  EXPECT_NEAR(rm[0], 0.9 * 0.5 + 0.1 * 4, 1e-12);
  EXPECT_NEAR(rm[1], 0.9 * -1 + 0.1 * 8, 1e-12);
  EXPECT_NEAR(rv[0], 0.9 * 2 + 0.1 * 20.0 / 3.0, 1e-10);
  EXPECT_NEAR(rv[1], 0.9 * 3 + 0.1 * 80.0 / 3.0, 1e-10);
}

TEST(BatchNorm, RunningStatsFollowPyTorchFormula4D) {
  const Tensor x = randn({3, 2, 4, 5}, f64) * 2.0 + 1.0;
  const Tensor running_mean = from_vector({0.25, -0.5}, {2}, f64);
  const Tensor running_var = from_vector({1.5, 0.75}, {2}, f64);
  const std::vector<double> rm0 = running_mean.to_vector<double>(), rv0 = running_var.to_vector<double>();
  const double momentum = 0.3;
  batch_norm(x, running_mean, running_var, Tensor(), Tensor(), true, momentum);
  // Updated in place, so counted as in-place changes (what saved them must not use them now).
  EXPECT_EQ(running_mean.version(), 1);
  EXPECT_EQ(running_var.version(), 1);
  const double n = 3 * 4 * 5;
  for (int64_t c = 0; c < 2; ++c) {
    const std::vector<double> values = channel(x, c);
    EXPECT_NEAR(running_mean.to_vector<double>()[c], (1 - momentum) * rm0[c] + momentum * mean_of(values), 1e-12);
    EXPECT_NEAR(running_var.to_vector<double>()[c],
                (1 - momentum) * rv0[c] + momentum * var_of(values) * n / (n - 1), 1e-10);
  }
  // f32 running statistics are updated the same way.
  const Tensor x32 = x.to(DType::f32);
  const Tensor rm32 = zeros({2}), rv32 = ones({2});
  batch_norm(x32, rm32, rv32, Tensor(), Tensor(), true);
  for (int64_t c = 0; c < 2; ++c) {
    const std::vector<double> values = channel(x, c);
    EXPECT_NEAR(rm32.to_vector<double>()[c], 0.1 * mean_of(values), 1e-5);
    EXPECT_NEAR(rv32.to_vector<double>()[c], 0.9 + 0.1 * var_of(values) * n / (n - 1), 1e-5);
  }
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  const Tensor x = randn({4, 3, 2, 2}, f64);
  const Tensor running_mean = from_vector({0.5, -1, 2}, {3}, f64);
  const Tensor running_var = from_vector({4, 0.25, 1}, {3}, f64);
  const Tensor w = from_vector({1.5, 2, -1}, {3}, f64), b = from_vector({0, 1, 2}, {3}, f64);
  const double eps = 1e-3;
  const Tensor out = batch_norm(x, running_mean, running_var, w, b, false, 0.1, eps);
  const double rm[] = {0.5, -1, 2}, rv[] = {4, 0.25, 1}, wv[] = {1.5, 2, -1}, bv[] = {0, 1, 2};
  for (int64_t c = 0; c < 3; ++c) {
    const std::vector<double> in = channel(x, c), got = channel(out, c);
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_NEAR(got[i], (in[i] - rm[c]) / std::sqrt(rv[c] + eps) * wv[c] + bv[c], 1e-12);
    }
  }
  EXPECT_EQ(running_mean.to_vector<double>(), (std::vector<double>{0.5, -1, 2}));
  EXPECT_EQ(running_var.to_vector<double>(), (std::vector<double>{4, 0.25, 1}));
}

TEST(BatchNorm, WithoutRunningStatsEvalUsesTheBatch) {
  const Tensor x = randn({6, 4}, f64);
  const Tensor train = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  const Tensor eval = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false);
  EXPECT_EQ(train.to_vector<double>(), eval.to_vector<double>());
}

TEST(BatchNorm, GradientsInTrainingMode) {
  const auto bn = [](const std::vector<Tensor>& t) { return batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true); };
  // 2-D (N, C) and 4-D (N, C, H, W), with respect to input, weight and bias.
  EXPECT_TRUE(gradcheck(bn, {random_input({5, 3}, 1), random_input({3}, 2), random_input({3}, 3)}));
  EXPECT_TRUE(gradcheck(bn, {random_input({3, 2, 3, 4}, 4), random_input({2}, 5), random_input({2}, 6)}));
  // Running statistics being updated do not change the gradient.
  const Tensor rm = zeros({2}, f64), rv = ones({2}, f64);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& t) { return batch_norm(t[0], rm, rv, t[1], t[2], true, 0.5); },
                        {random_input({2, 2, 3, 3}, 7), random_input({2}, 8), random_input({2}, 9)}));
  // No affine transform: only the input's gradient.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
                        {random_input({4, 3, 2, 2}, 10)}));
  // Only the input requires grad, with a fixed weight.
  const Tensor w = random_input({3}, 11, false);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& t) { return batch_norm(t[0], Tensor(), Tensor(), w, Tensor(), true); },
                        {random_input({4, 3}, 12)}));
}

TEST(BatchNorm, GradientsInEvalMode) {
  const Tensor rm = from_vector({0.5, -0.25}, {2}, f64), rv = from_vector({2, 0.5}, {2}, f64);
  const auto bn = [&](const std::vector<Tensor>& t) { return batch_norm(t[0], rm, rv, t[1], t[2], false); };
  EXPECT_TRUE(gradcheck(bn, {random_input({3, 2, 2, 3}, 1), random_input({2}, 2), random_input({2}, 3)}));
  EXPECT_TRUE(gradcheck(bn, {random_input({4, 2}, 4), random_input({2}, 5), random_input({2}, 6)}));
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& t) { return batch_norm(t[0], rm, rv, Tensor(), Tensor(), false); },
                        {random_input({3, 2}, 7)}));
}

TEST(BatchNorm, LargeInputMatchesTextbookFormulas) {
  // Big enough (32768 elements) for the kernels to run on several threads; the backward pass
  // is compared with the textbook formula written out per element:
  //     dx = weight * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
  const int64_t N = 16, C = 8, S = 16 * 16;
  const Tensor x = (randn({N, C, 16, 16}, f64) * 3.0 + 2.0).detach().requires_grad_(true);
  const Tensor w = random_input({C}, 1), b = random_input({C}, 2);
  const Tensor dy = randn({N, C, 16, 16}, f64);
  const Tensor out = batch_norm(x, Tensor(), Tensor(), w, b, true);
  out.backward(dy);
  const std::vector<double> xs = x.to_vector<double>(), ys = out.to_vector<double>(), g = dy.to_vector<double>();
  const std::vector<double> dx = x.grad().to_vector<double>(), dw = w.grad().to_vector<double>();
  const std::vector<double> ws = w.to_vector<double>(), bs = b.to_vector<double>();
  for (int64_t c = 0; c < C; ++c) {
    const std::vector<double> values = channel(x, c);
    const double mu = mean_of(values), invstd = 1.0 / std::sqrt(var_of(values) + 1e-5);
    double mean_dy = 0.0, mean_dy_xhat = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        mean_dy += g[i] / static_cast<double>(N * S);
        mean_dy_xhat += g[i] * (xs[i] - mu) * invstd / static_cast<double>(N * S);
      }
    }
    EXPECT_NEAR(dw[c], mean_dy_xhat * static_cast<double>(N * S), 1e-9);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        const double xhat = (xs[i] - mu) * invstd;
        ASSERT_NEAR(ys[i], xhat * ws[c] + bs[c], 1e-12);
        ASSERT_NEAR(dx[i], ws[c] * invstd * (g[i] - mean_dy - xhat * mean_dy_xhat), 1e-12);
      }
    }
  }
}

TEST(BatchNorm, Errors) {
  const Tensor x = randn({2, 4, 3, 3});
  EXPECT_EQ(error_message([] { batch_norm(randn({1, 4}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
            "batch_norm: expected more than 1 value per channel when training, got input shape [1, 4]");
  // One value per channel is fine in eval mode, where the running statistics are used.
  EXPECT_EQ(error_message([] { batch_norm(randn({1, 4}), zeros({4}), ones({4}), Tensor(), Tensor(), false); }),
            "no error");
  EXPECT_EQ(error_message([] { batch_norm(randn({2, 4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
            "batch_norm: expected input to be 2-D (N, C) or 4-D (N, C, H, W), got shape [2, 4, 3]");
  EXPECT_EQ(error_message([&] { batch_norm(x, Tensor(), Tensor(), ones({3}), Tensor(), true); }),
            "batch_norm: expected weight to have shape [4] (one value per channel of input shape [2, 4, 3, 3]), got "
            "shape [3]");
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), ones({4, 1}), true); },
               "expected bias to have shape [4]");
  expect_error([&] { batch_norm(x, zeros({5}), ones({4}), Tensor(), Tensor(), true); },
               "expected running_mean to have shape [4]");
  expect_error([&] { batch_norm(x, zeros({4}), ones({2}), Tensor(), Tensor(), true); },
               "expected running_var to have shape [4]");
  expect_error([&] { batch_norm(x, zeros({4}), Tensor(), Tensor(), Tensor(), true); }, "running_mean and running_var");
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), ones({4}, f64), Tensor(), true); },
               "batch_norm: expected all tensors to have the same dtype, got f32 and f64");
  expect_error([] { batch_norm(Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true); }, "batch_norm");
}
