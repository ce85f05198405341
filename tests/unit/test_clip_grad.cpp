// clip_grad_norm_ (torch.nn.utils.clip_grad_norm_): the total 2-norm of every gradient together,
// the gradients scaled by max_norm / (total + 1e-6) when that is below 1, untouched otherwise.
// PyTorch 1.13 on the same gradients:
//     a = torch.zeros(2, requires_grad=True); a.grad = torch.tensor([3., 4.])
//     b = torch.zeros(1, requires_grad=True); b.grad = torch.tensor([12.])
//     torch.nn.utils.clip_grad_norm_([a, b], 6.5)   # tensor(13.), a.grad [1.5, 2.0], b.grad [6.0]
#include <gtest/gtest.h>

#include <vector>

#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;

TEST(ClipGradNorm, ScalesEveryGradientByOneFactor) {
  const Tensor a = zeros({2}).requires_grad_(), b = zeros({1}).requires_grad_(), unused = zeros({3}).requires_grad_();
  a.set_grad(from_vector({3, 4}, {2}));
  b.set_grad(from_vector({12}, {1}));
  EXPECT_DOUBLE_EQ(grad_squared_sum({a, b, unused}), 169.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a, b, unused}, 6.5), 13.0);
  const std::vector<float> ga = a.grad().to_vector<float>(), gb = b.grad().to_vector<float>();
  EXPECT_FLOAT_EQ(ga[0], 1.5f);
  EXPECT_FLOAT_EQ(ga[1], 2.0f);
  EXPECT_FLOAT_EQ(gb[0], 6.0f);
  EXPECT_FALSE(unused.grad().defined());
}

TEST(ClipGradNorm, BelowTheCapNothingChanges) {
  const Tensor a = zeros({2}).requires_grad_();
  a.set_grad(from_vector({0.3, 0.4}, {2}));
  const std::vector<float> before = a.grad().to_vector<float>();
  EXPECT_NEAR(clip_grad_norm_({a}, 1.0), 0.5, 1e-7);
  EXPECT_EQ(a.grad().to_vector<float>(), before);
  test::expect_error([&] { clip_grad_norm_({a}, 0.0); }, "max_norm must be positive, got 0");
}
