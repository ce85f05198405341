// cross_entropy and nll_loss: hand-computed values, agreement with log_softmax + pick, large
// logits, the exact gradient (softmax - onehot) / N, gradchecks, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {
const TensorOptions f64 = TensorOptions().dtype(DType::f64);
}  // namespace

TEST(Loss, CrossEntropyKnownValues) {
  // One row: -log(softmax([1, 2, 3])[2]) = log(e + e^2 + e^3) - 3.
  Tensor logits = from_vector({1, 2, 3}, {1, 3}, f64);
  EXPECT_NEAR(cross_entropy(logits, from_vector(std::vector<int64_t>{2}, {1})).item(), 0.4076059644443803, 1e-15);
  EXPECT_NEAR(cross_entropy(logits, from_vector(std::vector<int64_t>{0}, {1})).item(), 2.4076059644443806, 1e-15);
  // Two rows: the mean of the two row losses; uniform logits give log(C).
  Tensor two = from_vector({1, 2, 3,
                            0, 0, 0}, {2, 3}, f64);
  EXPECT_NEAR(cross_entropy(two, from_vector(std::vector<int64_t>{2, 1}, {2})).item(), (0.4076059644443803 + std::log(3.0)) / 2, 1e-15);
  // The result is a 0-d tensor of the logits' dtype.
  Tensor loss = cross_entropy(zeros({4, 10}), from_vector(std::vector<int64_t>{0, 1, 2, 9}, {4}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_EQ(loss.dtype(), DType::f32);
  EXPECT_NEAR(loss.item(), std::log(10.0), 1e-6);
}

TEST(Loss, CrossEntropyEqualsNllOfLogSoftmax) {
  Tensor logits = random_input({6, 5}, 1, false) * 4.0;
  Tensor target = from_vector(std::vector<int64_t>{0, 4, 2, 2, 1, 3}, {6});
  const double ce = cross_entropy(logits, target).item();
  EXPECT_NEAR(ce, nll_loss(log_softmax(logits, 1), target).item(), 1e-15);
  // nll_loss against the definition: -mean of the picked entries.
  const std::vector<double> lp = log_softmax(logits, 1).to_vector<double>();
  const double want = -(lp[0] + lp[9] + lp[12] + lp[17] + lp[21] + lp[28]) / 6;
  EXPECT_NEAR(ce, want, 1e-15);
  // Strided logits give the same answer.
  EXPECT_NEAR(cross_entropy(logits.t().contiguous().t(), target).item(), ce, 1e-15);
}

TEST(Loss, LargeBatchSplitOverThreadsMatchesReference) {
  // 4096 rows of 10 classes: enough for the kernel to spread rows over threads.
  const int64_t rows = 4096, classes = 10;
  Tensor logits = random_input({rows, classes}, 9, false) * 3.0;
  std::vector<int64_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[i] = (i * 7) % classes;
  // The reference: log(sum(e^x)) - x[target] per row, averaged.
  const std::vector<double> x = logits.to_vector<double>();
  double want = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < classes; ++j) s += std::exp(x[i * classes + j]);
    want += std::log(s) - x[i * classes + labels[i]];
  }
  want /= rows;
  EXPECT_NEAR(cross_entropy(logits, from_vector(labels, {rows})).item(), want, 1e-13);
}

TEST(Loss, LargeLogitsDoNotOverflow) {
  for (DType dtype : {DType::f32, DType::f64}) {
    // The correct class is 1000 below the best one: the loss is 1000, not inf.
    Tensor logits = from_vector({1000, 0,
                                 1000, 1000}, {2, 2}, TensorOptions().dtype(dtype));
    const double loss = cross_entropy(logits, from_vector(std::vector<int64_t>{1, 0}, {2})).item();
    EXPECT_NEAR(loss, (1000 + std::log(2.0)) / 2, 1e-3);
  }
}

TEST(Loss, CrossEntropyGradientIsSoftmaxMinusOneHotOverN) {
  Tensor logits = random_input({3, 4}, 2);
  Tensor target = from_vector(std::vector<int64_t>{3, 0, 1}, {3});
  (cross_entropy(logits, target) * 2.0).backward();
  std::vector<double> want = softmax(logits.detach(), 1).to_vector<double>();
  want[3] -= 1;
  want[4] -= 1;
  want[9] -= 1;
  const std::vector<double> got = logits.grad().to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], 2.0 * want[i] / 3, 1e-15) << "element " << i;
}

TEST(Loss, Gradcheck) {
  Tensor target = from_vector(std::vector<int64_t>{1, 0, 4, 4, 2}, {5});
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], target); },
                        {random_input({5, 5}, 3)}));
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0] * 3.0, target); },
                        {random_input({5, 5}, 4)}));
  // A transposed (strided) logits tensor.
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0].t(), target); },
                        {random_input({5, 5}, 5)}));
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return nll_loss(in[0], target); },
                        {random_input({5, 5}, 6)}));
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return nll_loss(log_softmax(in[0], 1), target); },
                        {random_input({5, 5}, 7)}));
}

TEST(Loss, ErrorsNameTheProblem) {
  Tensor logits = zeros({4, 10});
  EXPECT_EQ(error_message([&] { cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1, 2, 10}, {4})); }),
            "cross_entropy: target 10 is out of range for 10 classes (row 3)");
  EXPECT_EQ(error_message([&] { cross_entropy(logits, from_vector(std::vector<int64_t>{0, -1, 2, 3}, {4})); }),
            "cross_entropy: target -1 is out of range for 10 classes (row 1)");
  expect_error([&] { cross_entropy(logits, zeros({4})); },
               "cross_entropy: expected target to hold class indices as i64, got f32");
  expect_error([&] { cross_entropy(zeros({10}), from_vector(std::vector<int64_t>{1}, {1})); },
               "cross_entropy: expected logits to be 2-D (N, C), got shape [10]");
  expect_error([&] { cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1, 2}, {3})); },
               "cross_entropy: expected target of shape [4], one class index per row of logits [4, 10], got shape [3]");
  expect_error([&] { cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4, 1})); }, "got shape [4, 1]");
  expect_error([&] { nll_loss(logits, from_vector(std::vector<int64_t>{0, 1, 2, 12}, {4})); },
               "nll_loss: target 12 is out of range for 10 classes (row 3)");
  expect_error([&] { cross_entropy(from_vector(std::vector<int64_t>{0, 1}, {1, 2}), from_vector(std::vector<int64_t>{0}, {1})); },
               "cross_entropy: expected a floating tensor, got i64");
}
