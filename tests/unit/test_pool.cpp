// max_pool2d: values against a naive reference, which element receives the gradient (ties,
// overlapping windows, padding), finite-difference gradients, and the errors for bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// The definition, written as plainly as possible: every output is the largest input that its
// window covers, padding excluded.
std::vector<double> reference_max_pool2d(const Tensor& input, int64_t k, int64_t s, int64_t p) {
  const std::vector<double> x = input.to_vector<double>();
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
  std::vector<double> out;
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < k; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            const int64_t h = oh * s - p + i, w = ow * s - p + j;
            if (h >= 0 && h < H && w >= 0 && w < W) best = std::max(best, x[(nc * H + h) * W + w]);
          }
        }
        out.push_back(best);
      }
    }
  }
  return out;
}

// A float64 leaf holding a shuffled 0.01, 0.02, ...: no two values within a finite-difference
// step of each other, so the argmax of every window is stable under gradcheck's nudges.
Tensor distinct_input(const Shape& shape, uint64_t seed) {
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  std::iota(values.begin(), values.end(), 1.0);
  Generator g(seed);
  for (size_t i = values.size() - 1; i > 0; --i) std::swap(values[i], values[g.below(i + 1)]);
  for (double& v : values) v *= 0.01;
  return from_vector(values, shape, TensorOptions().dtype(DType::f64)).requires_grad_(true);
}

}  // namespace

TEST(Pool, ForwardMatchesNaiveReference) {
  struct Case {
    Shape shape;
    int64_t k, s, p;
  };
  const std::vector<Case> cases = {
      {{2, 3, 6, 6}, 2, 2, 0},   // the CNN's pooling
      {{2, 2, 7, 7}, 3, 2, 1},   // overlapping windows with padding
      {{1, 2, 5, 8}, 2, 2, 0},   // non-square input, odd height (last row dropped)
      {{2, 1, 9, 4}, 3, 1, 1},   // stride 1, non-square
      {{1, 1, 6, 5}, 4, 3, 2},   // the largest allowed padding
      {{1, 2, 1, 1}, 4, 1, 2},   // one pixel: some window columns lie wholly in the padding
  };
  for (const Case& c : cases) {
    const Tensor x = randn(c.shape);
    const Tensor out = max_pool2d(x, c.k, c.s, c.p);
    EXPECT_EQ(out.shape()[2], (c.shape[2] + 2 * c.p - c.k) / c.s + 1);
    EXPECT_EQ(out.shape()[3], (c.shape[3] + 2 * c.p - c.k) / c.s + 1);
    EXPECT_EQ(out.to_vector<double>(), reference_max_pool2d(x, c.k, c.s, c.p))
        << "k=" << c.k << " s=" << c.s << " p=" << c.p << " shape " << shape_str(c.shape);
  }
  // f64 works too, and stride 0 means stride = kernel_size.
  const Tensor x = randn({2, 2, 6, 4}, TensorOptions().dtype(DType::f64));
  EXPECT_EQ(max_pool2d(x, 2).to_vector<double>(), reference_max_pool2d(x, 2, 2, 0));
  EXPECT_EQ(max_pool2d(x, 3, 0).shape(), (Shape{2, 2, 2, 1}));
}

TEST(Pool, HandComputedExample) {
  // One 4x4 plane, 2x2 windows: the maximum of each quadrant.
  const Tensor x = from_vector({1, 5, 2, 0,   //
                                3, 4, 8, 7,   //
                                -1, -2, 6, 6,  //
                                -3, -4, 6, 9},
                               {1, 1, 4, 4});
  EXPECT_EQ(max_pool2d(x, 2).to_vector<float>(), (std::vector<float>{5, 8, -1, 9}));
}

TEST(Pool, NonContiguousInput) {
  // A transposed view must pool its logical elements, not its memory order.
  const Tensor base = randn({2, 3, 6, 5});
  const Tensor x = base.transpose(2, 3);  // (2, 3, 5, 6), not contiguous
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_EQ(max_pool2d(x, 2, 1).to_vector<double>(), reference_max_pool2d(x.contiguous(), 2, 1, 0));
}

TEST(Pool, PaddingNeverWins) {
  // All inputs negative: if padding counted as 0, border outputs would be 0.
  const Tensor x = full({1, 2, 5, 5}, -3.0);
  const Tensor out = max_pool2d(x, 3, 2, 1);
  EXPECT_EQ(out.shape(), (Shape{1, 2, 3, 3}));
  for (float v : out.to_vector<float>()) EXPECT_EQ(v, -3.0f);
}

TEST(Pool, TiesSendTheGradientToTheFirstMaximum) {
  // Every window holds four equal values: the first in row-major order (top-left) wins.
  const Tensor x = zeros({1, 1, 4, 4}, TensorOptions().dtype(DType::f64).requires_grad(true));
  sum(max_pool2d(x, 2)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 1, 0,  //
                                                               0, 0, 0, 0,  //
                                                               1, 0, 1, 0,  //
                                                               0, 0, 0, 0}));
}

TEST(Pool, NaNWinsItsWindow) {
  // A NaN propagates instead of vanishing, and the gradient goes to it, as in PyTorch: through
  // the 2x2 stride-2 fast path and through the general loop (stride 1).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector({1, nan, 2, 0,    //
                                3, 4, 8, 7,      //
                                -1, -2, 6, 6,    //
                                -3, -4, 6, nan},
                               {1, 1, 4, 4}, TensorOptions().dtype(DType::f64))
                       .requires_grad_(true);
  const std::vector<double> fast = max_pool2d(x, 2).to_vector<double>();
  EXPECT_TRUE(std::isnan(fast[0]));
  EXPECT_EQ(fast[1], 8.0);
  EXPECT_EQ(fast[2], -1.0);
  EXPECT_TRUE(std::isnan(fast[3]));
  sum(max_pool2d(x, 2)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0,  //
                                                               0, 0, 1, 0,  //
                                                               1, 0, 0, 0,  //
                                                               0, 0, 0, 1}));
  const std::vector<double> general = max_pool2d(x, 2, 1).to_vector<double>();  // (3, 3)
  for (size_t i = 0; i < general.size(); ++i) {
    EXPECT_EQ(std::isnan(general[i]), i == 0 || i == 1 || i == 8) << "output " << i;
  }
}

TEST(Pool, OverlappingWindowsAccumulateGradient) {
  // The centre of a 3x3 plane is the maximum of all four 2x2 windows (stride 1), so it
  // collects all four output gradients.
  const Tensor x = from_vector({1, 2, 3, 4, 9, 5, 6, 7, 8}, {1, 1, 3, 3}, TensorOptions().dtype(DType::f64))
                       .requires_grad_(true);
  const Tensor out = max_pool2d(x, 2, 1);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{9, 9, 9, 9}));
  out.backward(from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, TensorOptions().dtype(DType::f64)));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 10, 0, 0, 0, 0}));

  // k=3 s=2 p=1 on 5x5: the windows cover rows (and columns) -1..1, 1..3 and 3..5, so
  // element (1, 1) lies in four of them.
  std::vector<double> values(25, 0.0);
  values[1 * 5 + 1] = 1.0;
  const Tensor z = from_vector(values, {1, 1, 5, 5}, TensorOptions().dtype(DType::f64)).requires_grad_(true);
  sum(max_pool2d(z, 3, 2, 1)).backward();
  EXPECT_EQ(z.grad().to_vector<double>()[1 * 5 + 1], 4.0);
  EXPECT_EQ(sum(z.grad()).item(), 9.0);  // one unit of gradient per output
}

TEST(Pool, LargeInputsMatchReferenceOnEveryThread) {
  // Big enough (32768 elements) for the kernels to split planes across threads.
  const Tensor x = randn({4, 8, 32, 32}, TensorOptions().dtype(DType::f64)).detach().requires_grad_(true);
  const Tensor out = max_pool2d(x, 3, 2, 1);
  const std::vector<double> expected = reference_max_pool2d(x, 3, 2, 1);
  EXPECT_EQ(out.to_vector<double>(), expected);
  // The gradient lands only on window maxima, one unit per output: every nonzero gradient
  // sits on an input equal to some output, and they add up to the number of outputs.
  sum(out).backward();
  const std::vector<double> grad = x.grad().to_vector<double>(), values = x.to_vector<double>();
  double total = 0.0;
  for (size_t i = 0; i < grad.size(); ++i) {
    total += grad[i];
    if (grad[i] != 0.0) {
      EXPECT_NE(std::find(expected.begin(), expected.end(), values[i]), expected.end());
    }
  }
  EXPECT_EQ(total, static_cast<double>(out.numel()));
}

TEST(Pool, GradientsMatchFiniteDifferences) {
  const auto pool = [](int64_t k, int64_t s, int64_t p) {
    return [=](const std::vector<Tensor>& x) { return max_pool2d(x[0], k, s, p); };
  };
  EXPECT_TRUE(gradcheck(pool(2, 2, 0), {distinct_input({2, 2, 4, 4}, 1)}));
  EXPECT_TRUE(gradcheck(pool(3, 2, 1), {distinct_input({1, 2, 5, 5}, 2)}));
  EXPECT_TRUE(gradcheck(pool(2, 1, 0), {distinct_input({1, 2, 4, 5}, 3)}));  // overlapping
  EXPECT_TRUE(gradcheck(pool(2, 2, 1), {distinct_input({2, 1, 3, 6}, 4)}));  // non-square, padded
}

TEST(Pool, Errors) {
  const Tensor x = randn({1, 1, 4, 4});
  EXPECT_EQ(error_message([] { max_pool2d(randn({1, 4, 4}), 2); }),
            "max_pool2d: expected input to be 4-D (N, C, H, W), got shape [1, 4, 4]");
  expect_error([&] { max_pool2d(x, 0); }, "max_pool2d: kernel_size must be positive, got 0");
  expect_error([&] { max_pool2d(x, 2, -1); }, "max_pool2d: stride must be positive");
  const std::string padding = error_message([&] { max_pool2d(x, 3, 1, 2); });
  EXPECT_NE(padding.find("max_pool2d: padding must be between 0 and kernel_size / 2 = 1, got padding 2"),
            std::string::npos)
      << padding;
  expect_error([&] { max_pool2d(x, 2, 2, -1); }, "padding");
  const std::string small = error_message([] { max_pool2d(randn({1, 1, 2, 5}), 3); });
  EXPECT_NE(small.find("max_pool2d: input of spatial size 2x5"), std::string::npos) << small;
  EXPECT_NE(small.find("smaller than kernel_size 3"), std::string::npos) << small;
  expect_error([] { max_pool2d(from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 1, 2, 2}), 2); }, "max_pool2d: expected a floating tensor, got i64");
  expect_error([] { max_pool2d(Tensor(), 2); }, "max_pool2d");
}
