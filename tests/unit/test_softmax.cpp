// softmax and log_softmax: known values, rows summing to 1, large logits, every dimension of a
// 3-D tensor against a naive reference, strided input, gradients, errors.
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

// exp(x) / sum(exp(x)) along dim, written with other ops, without any stabilising: fine for
// small inputs, and independent of the kernel under test.
Tensor naive_softmax(const Tensor& x, int64_t dim) {
  Tensor e = exp(x);
  return e / sum(e, {dim}, true);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}
}  // namespace

TEST(Softmax, KnownValues) {
  // softmax([1, 2, 3]) = e^[1, 2, 3] / (e + e^2 + e^3)
  Tensor x = from_vector({1, 2, 3}, {3}, f64);
  expect_near(softmax(x, 0).to_vector<double>(), {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, 1e-15);
  expect_near(log_softmax(x, 0).to_vector<double>(), {-2.4076059644443806, -1.4076059644443804, -0.4076059644443803},
              1e-15);
  // Equal logits give equal probabilities; a 0-d tensor is a line of one element.
  expect_near(softmax(zeros({4}), 0).to_vector<double>(), {0.25, 0.25, 0.25, 0.25}, 1e-7);
  EXPECT_EQ(softmax(full({}, 5.0), 0).item(), 1.0);
}

TEST(Softmax, RowsSumToOneAlongEitherDimension) {
  Tensor x = random_input({4, 6}, 1, false) * 5.0;
  for (int64_t dim : {0, 1}) {
    Tensor y = softmax(x, dim);
    expect_near(sum(y, {dim}).to_vector<double>(), std::vector<double>(x.size(1 - dim), 1.0), 1e-14);
    expect_near(y.to_vector<double>(), naive_softmax(x, dim).to_vector<double>(), 1e-14);
  }
}

TEST(Softmax, EveryDimensionOf3DMatchesNaiveReference) {
  Tensor x = random_input({3, 4, 5}, 2, false) * 3.0;
  for (int64_t dim : {0, 1, 2, -2}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const Tensor want = naive_softmax(x, dim);
    expect_near(softmax(x, dim).to_vector<double>(), want.to_vector<double>(), 1e-14);
    expect_near(log_softmax(x, dim).to_vector<double>(), log(want).to_vector<double>(), 1e-13);
  }
  // f32 agrees with f64 to float precision.
  expect_near(softmax(x.to(DType::f32), 1).to_vector<double>(), naive_softmax(x, 1).to_vector<double>(), 1e-6);
}

TEST(Softmax, LargeTensorSplitOverThreadsMatchesReference) {
  // 64 000 elements: enough for the kernels to spread lines over threads.
  Tensor x = random_input({64, 1000}, 4, false) * 5.0;
  for (int64_t dim : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const Tensor want = naive_softmax(x, dim);
    expect_near(softmax(x, dim).to_vector<double>(), want.to_vector<double>(), 1e-14);
    expect_near(log_softmax(x, dim).to_vector<double>(), log(want).to_vector<double>(), 1e-12);
  }
}

TEST(Softmax, StridedInput) {
  Tensor x = random_input({5, 3}, 3, false);
  Tensor xt = x.t();  // (3, 5), not contiguous
  expect_near(softmax(xt, 1).to_vector<double>(), naive_softmax(xt.contiguous(), 1).to_vector<double>(), 1e-14);
  expect_near(log_softmax(xt, 0).to_vector<double>(), log(naive_softmax(xt.contiguous(), 0)).to_vector<double>(),
              1e-14);
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  // e^1000 overflows, but only differences between logits matter.
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor x = from_vector({1000, 1001, 1000, 
                            -1000, 0, 1000}, {2, 3}, TensorOptions().dtype(dtype));
    const std::vector<double> p = softmax(x, 1).to_vector<double>();
    expect_near(p, {0.21194155761708547, 0.5761168847658291, 0.21194155761708547, 0, 0, 1}, 1e-6);
    const std::vector<double> lp = log_softmax(x, 1).to_vector<double>();
    expect_near(lp, {-1.5514447139320511, -0.5514447139320511, -1.5514447139320511, -2000, -1000, 0}, 1e-4);
    for (double v : lp) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(Softmax, NaNSpreadsOverItsLineOnly) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor y = softmax(from_vector({1, nan, 2, 0, 0, 0}, {2, 3}, f64), 1);
  for (int64_t j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(y[0][j].item()));
  expect_near(y[1].to_vector<double>(), {1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-15);
}

TEST(Softmax, Gradcheck) {
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return softmax(in[0], dim); },
                          {random_input({2, 3, 4}, 10 + dim)}));
    EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); },
                          {random_input({2, 3, 4}, 20 + dim)}));
  }
  // Strided input, 2-D both dims.
  for (int64_t dim : {0, 1}) {
    EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return softmax(in[0].t(), dim); },
                          {random_input({4, 3}, 30 + dim)}));
    EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return log_softmax(in[0].t(), dim); },
                          {random_input({4, 3}, 40 + dim)}));
  }
}

TEST(Softmax, ErrorsNameTheProblem) {
  expect_error([] { softmax(zeros({2, 3}), 2); }, "softmax: dimension 2 is out of range for a 2-D tensor");
  expect_error([] { log_softmax(zeros({2, 3}), -3); }, "log_softmax: dimension -3 is out of range");
  expect_error([] { softmax(from_vector(std::vector<int64_t>{1, 2}, {2}), 0); }, "softmax: expected a floating tensor, got i64");
  EXPECT_THROW(log_softmax(Tensor(), 0), Error);
}
