// max, max(dim) and argmax: values and positions against a naive loop, ties, NaN, keepdim,
// gradients, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {
const TensorOptions f64 = TensorOptions().dtype(DType::f64);

// The naive reference for a 3-D tensor reduced along its middle dimension.
void naive_max_middle(const Tensor& x, std::vector<double>& values, std::vector<int64_t>& indices) {
  const std::vector<double> v = x.contiguous().to_vector<double>();
  const int64_t A = x.size(0), B = x.size(1), C = x.size(2);
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t c = 0; c < C; ++c) {
      int64_t best = 0;
      for (int64_t b = 1; b < B; ++b) {
        if (v[(a * B + b) * C + c] > v[(a * B + best) * C + c]) best = b;
      }
      values.push_back(v[(a * B + best) * C + c]);
      indices.push_back(best);
    }
  }
}
}  // namespace

TEST(Max, AllElementsGivesA0dTensor) {
  Tensor x = from_vector({3, -1, 7, 2, 7, 0}, {2, 3}, f64);
  Tensor m = max(x);
  EXPECT_EQ(m.dim(), 0);
  EXPECT_EQ(m.item(), 7.0);
  EXPECT_EQ(max(from_vector({-5, -2, -9}, {3})).item(), -2.0);  // f32, all negative
  EXPECT_EQ(max(from_vector(std::vector<int64_t>{4, 11, -3}, {3})).item<int64_t>(), 11);
  EXPECT_EQ(max(full({}, 2.5)).item(), 2.5);  // 0-d input
}

TEST(Max, AlongADimensionGivesValuesAndIndices) {
  // x: (2, 3)
  Tensor x = from_vector({1, 5, 2, 
                          8, 0, 3}, {2, 3}, f64);
  auto [v1, i1] = max(x, 1);
  EXPECT_EQ(v1.shape(), (Shape{2}));
  EXPECT_EQ(v1.to_vector<double>(), (std::vector<double>{5, 8}));
  EXPECT_EQ(i1.dtype(), DType::i64);
  EXPECT_EQ(i1.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));

  auto [v0, i0] = max(x, 0);
  EXPECT_EQ(v0.to_vector<double>(), (std::vector<double>{8, 5, 3}));
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));

  auto [vk, ik] = max(x, -1, /*keepdim=*/true);
  EXPECT_EQ(vk.shape(), (Shape{2, 1}));
  EXPECT_EQ(ik.shape(), (Shape{2, 1}));
  EXPECT_EQ(vk.to_vector<double>(), (std::vector<double>{5, 8}));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 3}));
}

TEST(Max, MiddleDimensionAndStridedInputMatchNaiveLoop) {
  Tensor x = random_input({3, 5, 4}, 7, false);
  std::vector<double> values;
  std::vector<int64_t> indices;
  naive_max_middle(x, values, indices);
  auto [v, i] = max(x, 1);
  EXPECT_EQ(v.shape(), (Shape{3, 4}));
  EXPECT_EQ(v.to_vector<double>(), values);
  EXPECT_EQ(i.to_vector<int64_t>(), indices);

  // The same data seen through a transpose: (3, 4, 5) reduced along dim 2.
  Tensor xt = x.transpose(1, 2);
  ASSERT_FALSE(xt.is_contiguous());
  auto [vt, it] = max(xt, 2);
  EXPECT_EQ(vt.to_vector<double>(), values);
  EXPECT_EQ(it.to_vector<int64_t>(), indices);
}

TEST(Max, LargeTensorSplitOverThreadsMatchesNaiveLoop) {
  // 60 000 elements: enough for the kernel to spread rows over threads.
  Tensor x = random_input({300, 200}, 8, false);
  std::vector<double> values;
  std::vector<int64_t> indices;
  naive_max_middle(x.reshape({300, 200, 1}), values, indices);
  auto [v, i] = max(x, 1);
  EXPECT_EQ(v.to_vector<double>(), values);
  EXPECT_EQ(i.to_vector<int64_t>(), indices);
}

TEST(Max, TiesGoToTheFirstOccurrence) {
  Tensor x = from_vector({2, 9, 9, 1,
                          4, 4, 4, 4}, {2, 4});
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(max(x, 1).second.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(from_vector({3, 3}, {2, 1}), 0).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(argmax(from_vector(std::vector<int64_t>{5, 2, 5}, {3}), 0).item<int64_t>(), 0);
}

TEST(Max, NaNIsTheLargestValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector({1, nan, 3, nan,
                          1, 2, 3, 0}, {2, 4}, f64);
  auto [v, i] = max(x, 1);
  EXPECT_TRUE(std::isnan(v[0].item()));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v[1].item(), 3.0);
  EXPECT_TRUE(std::isnan(max(x).item()));
}

TEST(Max, GradientGoesToTheSelectedPosition) {
  Tensor x = from_vector({1, 5, 2,
                          8, 0, 8}, {2, 3}, f64).requires_grad_();
  max(x, 1).first.backward(from_vector({10, 20}, {2}, f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 10, 0, 20, 0, 0}));

  // The overall max selects no position: tied maxima share the gradient evenly, as in PyTorch.
  Tensor y = from_vector({1, 8, 8, 3}, {2, 2}, f64).requires_grad_();
  (max(y) * 3.0).backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0, 1.5, 1.5, 0}));
  // A NaN maximum: the NaNs share it.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor z = from_vector({nan, 8, nan, 9}, {4}, f64).requires_grad_();
  max(z).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0.5, 0, 0.5, 0}));
}

TEST(Max, Gradcheck) {
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return max(in[0]); }, {random_input({3, 4}, 1)}));
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " keepdim " << keepdim);
      EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim).first; },
                            {random_input({2, 3, 4}, 2)}));
    }
  }
  // A strided input.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return max(in[0].t(), 1).first; },
                        {random_input({4, 3}, 3)}));
}

TEST(Max, ArgmaxRecordsNoGraph) {
  Tensor x = random_input({2, 3}, 4);
  Tensor i = argmax(x, 1);
  EXPECT_FALSE(i.requires_grad());
  auto [v, idx] = max(x, 1);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_FALSE(idx.requires_grad());
}

TEST(Max, ErrorsNameTheProblem) {
  expect_error([] { max(zeros({0, 3})); }, "max: cannot take the max of an empty tensor");
  expect_error([] { max(zeros({2, 0}), 1); }, "max: cannot reduce dimension 1 of shape [2, 0]");
  expect_error([] { argmax(zeros({2, 3}), 2); }, "argmax: dimension 2 is out of range for a 2-D tensor");
  EXPECT_THROW(max(Tensor()), Error);
}
