// Exercise ch01_softplus: the test of the student's softplus (starter.cpp or the file given
// with FILE=...): its values, its place in the graph as one node, and its gradient by finite
// differences (tests/unit/gradcheck.h, the check every op of the library passes).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lockstep.h"
#include "unit/gradcheck.h"

namespace exercise {
/// softplus(x) = log(1 + e^x), elementwise, differentiable (the function the student writes).
lockstep::Tensor softplus(const lockstep::Tensor& x);
}  // namespace exercise

namespace lockstep {
namespace {

TEST(Softplus, ValuesAreLogOfOnePlusExp) {
  const std::vector<double> xs = {-3.0, -0.5, 0.0, 0.5, 2.0};
  const Tensor x = from_vector(xs, {5}, TensorOptions().dtype(DType::f64));
  const std::vector<double> out = exercise::softplus(x).to_vector<double>();
  ASSERT_EQ(out.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(out[i], std::log1p(std::exp(xs[i])), 1e-12) << "softplus(" << xs[i] << ")";
}

TEST(Softplus, IsOneNodeNamedSoftplusBackward) {
  const Tensor x = test::random_input({3}, 1);
  const Tensor y = exercise::softplus(x);
  ASSERT_TRUE(y.grad_fn()) << "softplus's output has no grad_fn: record the op with record(...)";
  EXPECT_EQ(y.grad_fn()->name(), "SoftplusBackward")
      << "the output's grad_fn should be softplus's own node, not the last op of a composition";
  EXPECT_EQ(y.grad_fn()->next_edges().size(), 1u) << "softplus has one input, so its node has one edge";
}

TEST(Softplus, GradientMatchesFiniteDifferences) {
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return exercise::softplus(in[0]); },
                              {test::random_input({2, 3}, 2)}));
}

TEST(Softplus, RecordsNothingUnderNoGrad) {
  const Tensor x = test::random_input({4}, 3);
  NoGradGuard no_grad;
  EXPECT_FALSE(exercise::softplus(x).grad_fn());
}

}  // namespace
}  // namespace lockstep
