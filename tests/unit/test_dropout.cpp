// dropout: how many elements are dropped, how survivors are scaled, reproducibility from a
// seed, the identity cases (eval, p = 0), the gradient, and the errors for a bad p.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

TEST(Dropout, DropsAboutPAndScalesSurvivors) {
  const double p = 0.3;
  const Tensor x = rand({400, 500}) + 1.0;  // in [1, 2): never zero before dropout
  Generator g(7);
  const Tensor out = dropout(x, p, true, &g);
  const std::vector<float> in = x.to_vector<float>(), o = out.to_vector<float>();
  int64_t zeros_seen = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i] == 0.0f) {
      ++zeros_seen;
    } else {
      EXPECT_FLOAT_EQ(o[i], in[i] / (1.0f - static_cast<float>(p)));  // inverted dropout
    }
  }
  // 200000 draws: the standard deviation of the fraction is about 0.001.
  EXPECT_NEAR(static_cast<double>(zeros_seen) / static_cast<double>(o.size()), p, 0.01);
  // So the mean is preserved on average.
  EXPECT_NEAR(mean(out).item(), mean(x).item(), 0.01);
}

TEST(Dropout, SameSeedSameMask) {
  const Tensor x = ones({64, 32});
  Generator a(42), b(42), c(43);
  const std::vector<float> first = dropout(x, 0.5, true, &a).to_vector<float>();
  EXPECT_EQ(first, dropout(x, 0.5, true, &b).to_vector<float>());
  EXPECT_NE(first, dropout(x, 0.5, true, &c).to_vector<float>());
  // A generator moves on: the next call draws a new mask.
  EXPECT_NE(first, dropout(x, 0.5, true, &a).to_vector<float>());
  // Without a generator the default one is used, which manual_seed resets.
  manual_seed(5);
  const std::vector<float> d1 = dropout(x, 0.5, true).to_vector<float>();
  manual_seed(5);
  EXPECT_EQ(d1, dropout(x, 0.5, true).to_vector<float>());
}

TEST(Dropout, IdentityInEvalAndForZeroP) {
  const Tensor x = randn({3, 4});
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
}

TEST(Dropout, POneGivesZerosAndZeroGradient) {
  const Tensor x = (rand({5, 6}, TensorOptions().dtype(DType::f64)) + 1.0).detach().requires_grad_(true);
  const Tensor out = dropout(x, 1.0, true);
  for (double v : out.to_vector<double>()) EXPECT_EQ(v, 0.0);
  sum(out).backward();
  for (double v : x.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(Dropout, BackwardUsesTheSameScaledMask) {
  const double p = 0.25;
  const Tensor x = (rand({20, 10}, TensorOptions().dtype(DType::f64)) + 1.0).detach().requires_grad_(true);
  Generator g(3);
  const Tensor out = dropout(x, p, true, &g);
  sum(out).backward();
  const std::vector<double> o = out.to_vector<double>(), grad = x.grad().to_vector<double>();
  for (size_t i = 0; i < o.size(); ++i) EXPECT_EQ(grad[i], o[i] == 0.0 ? 0.0 : 1.0 / (1.0 - p));
}

TEST(Dropout, GradientMatchesFiniteDifferences) {
  // Reseeding inside the function makes every evaluation draw the same mask.
  Generator g;
  const auto fn = [&](const std::vector<Tensor>& t) {
    g.manual_seed(11);
    return dropout(t[0], 0.4, true, &g);
  };
  EXPECT_TRUE(gradcheck(fn, {random_input({6, 7}, 1)}));
}

TEST(Dropout, Errors) {
  const Tensor x = ones({4});
  EXPECT_EQ(error_message([&] { dropout(x, -0.1, true); }),
            "dropout: expected a probability p between 0 and 1, got -0.1");
  EXPECT_EQ(error_message([&] { dropout(x, 1.5, true); }),
            "dropout: expected a probability p between 0 and 1, got 1.5");
  // A bad p is an error in eval mode too, as in PyTorch.
  expect_error([&] { dropout(x, 2.0, false); }, "dropout: expected a probability");
  EXPECT_EQ(error_message([] { dropout(from_vector(std::vector<int64_t>{1, 2}, {2}), 0.5, true); }),
            "dropout: expected a floating-point input, got i64");
  expect_error([] { dropout(Tensor(), 0.5, true); }, "dropout");
}
