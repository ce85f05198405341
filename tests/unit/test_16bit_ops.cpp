// f16 and bf16 compute in the CPU kernels of sum, max, softmax, the losses, max_pool2d,
// batch_norm and dropout: each 16-bit result against the f32 kernel run on the same values (the
// 16-bit inputs widened to f32), the output dtypes, batch_norm's mixed dtypes (f32 statistics
// for 16-bit activations), f16's overflow to inf and underflow to 0, and the message of a
// kernel that has no 16-bit version.
//
// Tolerance. A kernel computes a 16-bit input in float (its sums in double) and rounds each
// output element to 16 bits once, so a 16-bit result r is the f32 result y rounded to the
// format: |r - y| <= u |y|, where u is the format's unit roundoff, half the spacing of its
// numbers just above 1: 2^-8 for bf16 (8 significant bits), 2^-11 for f16 (11). Below the
// smallest normal number the spacing stops shrinking, which adds half the smallest subnormal
// (2^-25 for f16; 2^-134 for bf16, which has f32's range). A reduction of n terms may add them
// in float, or in another order than the f32 kernel (as a GPU kernel does): any order of a
// float sum is within (n - 1) u32 sum|term| of the exact one (u32 = 2^-24; Higham, "Accuracy
// and Stability of Numerical Algorithms", 4.2), so a reduction gets n u32 sum|term| more. An
// elementwise pass gets a few u32 of its largest output, room for a multiply-add that one
// compiled loop fuses and the other does not. Results that only select or copy (max, pooling
// forward, masks, the f32 statistics) must be equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lockstep.h"
#include "tensor/ops/dispatch/batch_norm_kernels.h"
#include "tensor/ops/dispatch/dropout_kernels.h"
#include "tensor/ops/dispatch/loss_kernels.h"
#include "tensor/ops/dispatch/max_kernels.h"
#include "tensor/ops/dispatch/pool_kernels.h"
#include "tensor/ops/dispatch/softmax_kernels.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

constexpr double kU32 = 0x1p-24;  // f32's unit roundoff

// A 16-bit format and the numbers its tolerance is built from.
struct Format {
  DType dtype;
  double u;           // unit roundoff: 2^-(significant bits)
  double half_tiny;   // half the smallest subnormal: the rounding error floor near zero
};

Format format_of(DType dtype) {
  return dtype == DType::f16 ? Format{DType::f16, 0x1p-11, 0x1p-25} : Format{DType::bf16, 0x1p-8, 0x1p-134};
}

// Expects `r` (16-bit) to be `y` (f32, the reference) rounded once: |r - y| <= u |y| + the
// subnormal floor + `slack`, element by element (`roundings` times u |y| where the result is
// rounded more than once). Reports the first few elements out of bounds.
void expect_rounded_once(const Tensor& r, const Tensor& y, const Format& f, double slack, const std::string& what,
                         double roundings = 1.0) {
  ASSERT_EQ(r.shape(), y.shape()) << what;
  const std::vector<double> rv = r.to_vector<double>(), yv = y.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < rv.size(); ++i) {
    const double bound = roundings * f.u * std::abs(yv[i]) + f.half_tiny + slack;
    if (std::abs(rv[i] - yv[i]) > bound && reported++ < 5) {
      ADD_FAILURE() << what << " " << dtype_name(f.dtype) << ": element " << i << " is " << rv[i] << ", f32 gives "
                    << yv[i] << " (bound " << bound << ")";
    }
  }
}

// The largest |element| of `t`.
double max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// Normal values times `scale` plus `shift`, rounded to `dtype`: every 16-bit test input is
// exactly representable, so the f32 reference sees the very same numbers.
Tensor random16(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Generator g(seed);
  return (randn(shape, {}, &g) * scale + shift).to(dtype);
}

Tensor f32(const Tensor& t) { return t.to(DType::f32); }

TensorOptions opts(DType dtype) { return TensorOptions().dtype(dtype); }

class Ops16bit : public ::testing::TestWithParam<DType> {
 protected:
  Format f = format_of(GetParam());
  DType dt = GetParam();
};

std::string format_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Formats, Ops16bit, ::testing::Values(DType::bf16, DType::f16), format_name);

// ---- sum and mean --------------------------------------------------------------------------

TEST_P(Ops16bit, SumAccumulatesInDoubleAndRoundsOnce) {
  // Positive terms, so that a sum accumulated in 16 bits would stall far from the truth.
  Generator g(1);
  const Tensor x = rand({64, 257}, {}, &g).to(dt);
  const Tensor x32 = f32(x);
  struct Case { Shape dims; int64_t n; };
  for (const Case& c : {Case{{}, 64 * 257}, Case{{1}, 257}, Case{{0}, 64}}) {
    const Tensor r = sum(x, c.dims), y = sum(x32, c.dims);
    EXPECT_EQ(r.dtype(), dt);
    // Each output sums n terms in [0, 1): sum|term| is the output itself.
    expect_rounded_once(r, y, f, static_cast<double>(c.n) * kU32 * max_abs(y), "sum over " + shape_str(c.dims));
  }
}

TEST_P(Ops16bit, MeanIsTakenInF32AndRoundedOnce) {
  const Tensor x = random16({33, 300}, dt, 2, 1.0, 3.0);
  const Tensor r = mean(x, {1}), y = mean(f32(x), {1});
  EXPECT_EQ(r.dtype(), dt);
  expect_rounded_once(r, y, f, 300 * kU32 * max_abs(f32(x)), "mean");
  EXPECT_EQ(mean(x).dtype(), dt);
}

TEST(Ops16bitRange, F16SumOverflowsToInfButBf16DoesNot) {
  // 2048 times 32: 65536, past f16's largest number 65504 (and its rounding boundary 65520).
  const Tensor x = full({2048}, 32.0);
  EXPECT_TRUE(std::isinf(sum(x.to(DType::f16)).item()));
  EXPECT_EQ(sum(x.to(DType::bf16)).item(), 65536.0);
  // The mean is taken in f32, so it stays finite where the f16 sum does not.
  EXPECT_EQ(mean(x.to(DType::f16)).item(), 32.0);
}

// ---- max -----------------------------------------------------------------------------------

TEST_P(Ops16bit, MaxSelectsWhatF32Selects) {
  // Rounded to 16 bits, normal numbers tie often: the first of equal maxima must win in both.
  const Tensor x = random16({7, 40, 9}, dt, 3);
  for (int64_t dim : {0, 1, 2}) {
    auto [values, indices] = max(x, dim);
    auto [values32, indices32] = max(f32(x), dim);
    EXPECT_EQ(values.dtype(), dt);
    EXPECT_EQ(indices.dtype(), DType::i64);
    EXPECT_EQ(values.to_vector<double>(), values32.to_vector<double>()) << "dim " << dim;
    EXPECT_EQ(indices.to_vector<int64_t>(), indices32.to_vector<int64_t>()) << "dim " << dim;
  }
  EXPECT_EQ(max(x).dtype(), dt);
  EXPECT_EQ(max(x).item(), max(f32(x)).item());
}

TEST_P(Ops16bit, MaxBackwardSendsTheGradientToTheWinner) {
  const Tensor x = random16({5, 12, 3}, dt, 4);
  const Tensor indices = max(f32(x), 1).second;
  const Tensor grad = random16({5, 3}, dt, 5);
  const Tensor grad_input = empty({5, 12, 3}, opts(dt)), grad_input32 = empty({5, 12, 3});
  cpu::max_backward_kernel(grad, indices, 1, grad_input);
  cpu::max_backward_kernel(f32(grad), indices, 1, grad_input32);
  EXPECT_EQ(grad_input.to_vector<double>(), grad_input32.to_vector<double>());
}

// ---- softmax and log_softmax -----------------------------------------------------------------

TEST_P(Ops16bit, SoftmaxIsComputedInFloatAndRoundedOnce) {
  const Tensor x = random16({6, 50}, dt, 6, 3.0);
  for (int64_t dim : {0, 1}) {
    for (bool log : {false, true}) {
      const Tensor r = log ? log_softmax(x, dim) : softmax(x, dim);
      const Tensor y = log ? log_softmax(f32(x), dim) : softmax(f32(x), dim);
      EXPECT_EQ(r.dtype(), dt);
      expect_rounded_once(r, y, f, 4 * kU32 * max_abs(y), std::string(log ? "log_softmax" : "softmax") + " dim " +
                                                               std::to_string(dim));
    }
  }
}

TEST_P(Ops16bit, SoftmaxBackwardIsComputedInFloatAndRoundedOnce) {
  const Tensor x = random16({6, 50}, dt, 7, 3.0), dy = random16({6, 50}, dt, 8);
  for (int64_t dim : {0, 1}) {
    for (bool log : {false, true}) {
      // y: the 16-bit forward's output, the value the backward pass is given.
      const Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
      const Tensor r = empty(x.shape(), opts(dt)), ref = empty(x.shape());
      cpu::softmax_backward_kernel(dy, y, dim, log, r);
      cpu::softmax_backward_kernel(f32(dy), f32(y), dim, log, ref);
      // Each output takes a sum over its line of n terms, each at most max|dy| (|y| <= 1 for
      // softmax), times a factor at most 1 (y, or e^y for log_softmax).
      const double n = static_cast<double>(x.size(dim));
      expect_rounded_once(r, ref, f, n * kU32 * n * max_abs(f32(dy)),
                          std::string(log ? "log_softmax" : "softmax") + " backward dim " + std::to_string(dim));
    }
  }
}

TEST(Ops16bitRange, F16SoftmaxNearItsLargestNumberStaysFiniteAndTinyProbabilitiesUnderflow) {
  // Logits near 65504: the max is subtracted in float, so nothing overflows.
  const Tensor big = from_vector({65504, 65472, 65504}, {3}).to(DType::f16);
  const std::vector<double> p = softmax(big, 0).to_vector<double>();
  EXPECT_NEAR(p[0], 0.5, 0x1p-11);
  EXPECT_NEAR(p[2], 0.5, 0x1p-11);
  EXPECT_EQ(p[1], 0.0);  // e^-32 / 2, about 6e-15: below f16's smallest subnormal 6e-8
  // e^-20, about 2e-9: zero in f16, kept by bf16's f32 range; log_softmax keeps it in both.
  const Tensor logits = from_vector({0.0, -20.0}, {2});
  EXPECT_EQ(softmax(logits.to(DType::f16), 0).to_vector<double>()[1], 0.0);
  EXPECT_GT(softmax(logits.to(DType::bf16), 0).to_vector<double>()[1], 1e-9);
  EXPECT_NEAR(log_softmax(logits.to(DType::f16), 0).to_vector<double>()[1], -20.0, 20.0 * 0x1p-11);
}

// ---- cross_entropy and nll_loss ---------------------------------------------------------------

TEST_P(Ops16bit, CrossEntropyIsComputedInFloatAndRoundedOnce) {
  const int64_t N = 32, C = 10;
  const Tensor logits = random16({N, C}, dt, 9, 2.0);
  Generator g(10);
  const Tensor target = (rand({N}, {}, &g) * static_cast<double>(C)).to(DType::i64);
  const Tensor lp = empty({N, C}, opts(dt)), loss = empty({}, opts(dt));
  const Tensor lp32 = empty({N, C}), loss32 = empty({});
  cpu::cross_entropy_kernel(logits, target, lp, loss);
  cpu::cross_entropy_kernel(f32(logits), target, lp32, loss32);
  expect_rounded_once(lp, lp32, f, 4 * kU32 * max_abs(lp32), "cross_entropy log_probs");
  // The loss is a mean of N row losses, each at most max|log_probs|.
  expect_rounded_once(loss, loss32, f, N * kU32 * max_abs(lp32), "cross_entropy loss");
  // The op: the loss in the logits' dtype.
  EXPECT_EQ(cross_entropy(logits, target).dtype(), dt);
  EXPECT_EQ(cross_entropy(logits, target).item(), loss.item());

  // Backward, given the 16-bit log-probabilities and a 16-bit loss gradient.
  const Tensor grad = full({}, 1.5).to(dt);
  const Tensor dx = empty({N, C}, opts(dt)), dx32 = empty({N, C});
  cpu::cross_entropy_backward_kernel(grad, lp, target, dx);
  cpu::cross_entropy_backward_kernel(f32(grad), f32(lp), target, dx32);
  expect_rounded_once(dx, dx32, f, 4 * kU32 * max_abs(dx32), "cross_entropy backward");
}

TEST_P(Ops16bit, NllLossIsComputedInFloatAndRoundedOnce) {
  const int64_t N = 40, C = 7;
  const Tensor lp = random16({N, C}, dt, 11, 2.0, -3.0);
  Generator g(12);
  const Tensor target = (rand({N}, {}, &g) * static_cast<double>(C)).to(DType::i64);
  const Tensor loss = nll_loss(lp, target), loss32 = nll_loss(f32(lp), target);
  EXPECT_EQ(loss.dtype(), dt);
  expect_rounded_once(loss, loss32, f, N * kU32 * max_abs(f32(lp)), "nll_loss");

  const Tensor grad = full({}, 0.7).to(dt);
  const Tensor dx = empty({N, C}, opts(dt)), dx32 = empty({N, C});
  cpu::nll_loss_backward_kernel(grad, target, dx);
  cpu::nll_loss_backward_kernel(f32(grad), target, dx32);
  expect_rounded_once(dx, dx32, f, 0.0, "nll_loss backward");
}

// ---- max_pool2d ----------------------------------------------------------------------------

TEST_P(Ops16bit, MaxPoolSelectsWhatF32Selects) {
  const Tensor x = random16({2, 3, 9, 10}, dt, 13);
  // 2x2 at stride 2 (the tuned path) and 3x3 at stride 2 with padding (the general one).
  struct Case { int64_t k, s, p, OH, OW; };
  for (const Case& c : {Case{2, 2, 0, 4, 5}, Case{3, 2, 1, 5, 5}}) {
    const Tensor out = empty({2, 3, c.OH, c.OW}, opts(dt)), out32 = empty({2, 3, c.OH, c.OW});
    const Tensor idx = empty({2, 3, c.OH, c.OW}, opts(DType::i64)), idx32 = empty({2, 3, c.OH, c.OW}, opts(DType::i64));
    cpu::max_pool2d_kernel(x, c.k, c.s, c.p, out, idx);
    cpu::max_pool2d_kernel(f32(x), c.k, c.s, c.p, out32, idx32);
    EXPECT_EQ(out.to_vector<double>(), out32.to_vector<double>()) << "kernel " << c.k;
    EXPECT_EQ(idx.to_vector<int64_t>(), idx32.to_vector<int64_t>()) << "kernel " << c.k;
    EXPECT_EQ(max_pool2d(x, c.k, c.s, c.p).dtype(), dt);
  }
}

TEST_P(Ops16bit, MaxPoolBackwardAddsOverlappingSharesInFloat) {
  // 3x3 windows at stride 1 overlap: a large input wins up to 9 windows and sums their shares.
  const Tensor x = random16({2, 2, 8, 8}, dt, 14);
  const Tensor idx = empty({2, 2, 6, 6}, opts(DType::i64)), out32 = empty({2, 2, 6, 6});
  cpu::max_pool2d_kernel(f32(x), 3, 1, 0, out32, idx);
  const Tensor g = random16({2, 2, 6, 6}, dt, 15);
  const Tensor gi = empty({2, 2, 8, 8}, opts(dt)), gi32 = empty({2, 2, 8, 8});
  cpu::max_pool2d_backward_kernel(g, idx, 3, 1, 0, gi);
  cpu::max_pool2d_backward_kernel(f32(g), idx, 3, 1, 0, gi32);
  expect_rounded_once(gi, gi32, f, 9 * kU32 * 9 * max_abs(f32(g)), "max_pool2d backward");
}

TEST(Ops16bitRange, F16MaxPoolKeepsItsLargestNumber) {
  const Tensor x = from_vector({-65504, 1, 65504, 65472}, {1, 1, 2, 2}).to(DType::f16);
  // The tuned 2x2 path and the general one (3x3, padding 1: every window holds all four).
  EXPECT_EQ(max_pool2d(x, 2).to_vector<double>(), std::vector<double>{65504});
  EXPECT_EQ(max_pool2d(x, 3, 1, 1).to_vector<double>(), std::vector<double>(4, 65504));
}

// ---- batch_norm ----------------------------------------------------------------------------

TEST_P(Ops16bit, BatchNormStatisticsAreF32AndEqualTheF32Kernels) {
  const Tensor x = random16({4, 3, 5, 5}, dt, 16, 2.0, 1.0), dy = random16({4, 3, 5, 5}, dt, 17);
  // Both read the same values and sum in double: the f32 results are the same numbers.
  const auto [mean, invstd] = cpu::batch_norm_stats_kernel(x, 1e-5);
  const auto [mean32, invstd32] = cpu::batch_norm_stats_kernel(f32(x), 1e-5);
  EXPECT_EQ(mean.dtype(), DType::f32);
  EXPECT_EQ(invstd.dtype(), DType::f32);
  EXPECT_EQ(mean.to_vector<float>(), mean32.to_vector<float>());
  EXPECT_EQ(invstd.to_vector<float>(), invstd32.to_vector<float>());
  const auto [sum_dy, sum_dy_xmu] = cpu::batch_norm_backward_reduce_kernel(dy, x, mean);
  const auto [sum_dy32, sum_dy_xmu32] = cpu::batch_norm_backward_reduce_kernel(f32(dy), f32(x), mean);
  EXPECT_EQ(sum_dy.dtype(), DType::f32);
  EXPECT_EQ(sum_dy_xmu.dtype(), DType::f32);
  EXPECT_EQ(sum_dy.to_vector<float>(), sum_dy32.to_vector<float>());
  EXPECT_EQ(sum_dy_xmu.to_vector<float>(), sum_dy_xmu32.to_vector<float>());
}

TEST_P(Ops16bit, BatchNormElementwisePassesRoundOnce) {
  const Tensor x = random16({4, 3, 5, 5}, dt, 18, 2.0, 1.0), dy = random16({4, 3, 5, 5}, dt, 19);
  const Tensor weight = from_vector({1.5, -0.5, 2.0}, {3}), bias = from_vector({0.25, 0.0, -1.0}, {3});
  const auto [mean, invstd] = cpu::batch_norm_stats_kernel(x, 1e-5);
  const Tensor out = empty(x.shape(), opts(dt)), out32 = empty(x.shape());
  cpu::batch_norm_elemt_kernel(x, mean, invstd, weight, bias, out);
  cpu::batch_norm_elemt_kernel(f32(x), mean, invstd, weight, bias, out32);
  expect_rounded_once(out, out32, f, 4 * kU32 * max_abs(out32), "batch_norm_elemt");

  const auto [sum_dy, sum_dy_xmu] = cpu::batch_norm_backward_reduce_kernel(dy, x, mean);
  const Tensor dx = empty(x.shape(), opts(dt)), dx32 = empty(x.shape());
  cpu::batch_norm_backward_elemt_kernel(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, 100, dx);
  cpu::batch_norm_backward_elemt_kernel(f32(dy), f32(x), mean, invstd, weight, sum_dy, sum_dy_xmu, 100, dx32);
  // dx = weight invstd (dy - mean(dy) - xhat mean(dy xhat)) combines three terms; with xhat =
  // (x - mean) invstd each is at most |weight| invstd max|dy| max(1, xhat^2).
  const Tensor xhat = empty(x.shape());
  cpu::batch_norm_elemt_kernel(f32(x), mean, invstd, Tensor(), Tensor(), xhat);
  const double xhat_max = max_abs(xhat);
  const double terms = 3 * max_abs(weight) * max_abs(invstd) * max_abs(f32(dy)) * std::max(1.0, xhat_max * xhat_max);
  expect_rounded_once(dx, dx32, f, 4 * kU32 * terms, "batch_norm_backward_elemt");
}

TEST_P(Ops16bit, BatchNormOfA16BitInputKeepsF32ParametersAndRunningStatistics) {
  const Tensor x = random16({4, 3, 5, 5}, dt, 20, 2.0, 1.0);
  // What autocast leaves BatchNorm2d with: f32 weight, bias and running statistics.
  auto run = [&](const Tensor& input, Tensor& running_mean, Tensor& running_var, Tensor& w, Tensor& b) {
    running_mean = zeros({3});
    running_var = ones({3});
    w = from_vector({1.5, -0.5, 2.0}, {3}).requires_grad_(true);
    b = from_vector({0.25, 0.0, -1.0}, {3}).requires_grad_(true);
    const Tensor in = input.detach().requires_grad_(true);
    const Tensor out = batch_norm(in, running_mean, running_var, w, b, true);
    sum(out).backward();
    return std::pair{out, in.grad()};
  };
  Tensor rm, rv, w, b, rm32, rv32, w32, b32;
  const auto [out, dx] = run(x, rm, rv, w, b);
  const auto [out32, dx32] = run(f32(x), rm32, rv32, w32, b32);
  EXPECT_EQ(out.dtype(), dt);
  EXPECT_EQ(dx.dtype(), dt);
  expect_rounded_once(out, out32, f, 4 * kU32 * max_abs(out32), "batch_norm");
  // Running statistics and parameter gradients stay f32 and equal the f32 input's.
  for (const auto& [t, t32] : {std::pair{rm, rm32}, std::pair{rv, rv32}, std::pair{w.grad(), w32.grad()},
                               std::pair{b.grad(), b32.grad()}}) {
    EXPECT_EQ(t.dtype(), DType::f32);
    EXPECT_EQ(t.to_vector<float>(), t32.to_vector<float>());
  }
  // A 16-bit input with f64 parameters is refused.
  const std::string name = dtype_name(dt);
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), ones({3}, opts(DType::f64)), Tensor(), true); },
               "batch_norm: expected weight of a " + name + " input to be f32 or " + name + ", got f64");
}

TEST_P(Ops16bit, BatchNormOfAConvertedModelComputesInF32AndRoundsItsBuffersOnce) {
  const Tensor x = random16({4, 3, 5, 5}, dt, 21, 2.0, 1.0);
  BatchNorm2d bn(3), bn32(3);
  bn.to(dt);
  ASSERT_EQ(bn.weight.dtype(), dt);
  const Tensor in = x.detach().requires_grad_(true), in32 = f32(x).detach().requires_grad_(true);
  const Tensor out = bn.forward(in), out32 = bn32.forward(in32);
  EXPECT_EQ(out.dtype(), dt);
  expect_rounded_once(out, out32, f, 4 * kU32 * max_abs(out32), "BatchNorm2d (converted)");
  // The buffers keep their dtype and hold the f32 update rounded once.
  EXPECT_EQ(bn.running_mean.dtype(), dt);
  EXPECT_EQ(bn.running_var.dtype(), dt);
  EXPECT_EQ(bn.running_mean.to_vector<double>(), bn32.running_mean.to(dt).to_vector<double>());
  EXPECT_EQ(bn.running_var.to_vector<double>(), bn32.running_var.to(dt).to_vector<double>());
  // The weight's gradient comes back in the weight's dtype.
  sum(out).backward();
  sum(out32).backward();
  EXPECT_EQ(bn.weight.grad().dtype(), dt);
  EXPECT_EQ(bn.weight.grad().to_vector<double>(), bn32.weight.grad().to(dt).to_vector<double>());
  EXPECT_EQ(in.grad().dtype(), dt);

  // Eval mode normalises with the (16-bit) running statistics, in f32.
  bn.eval();
  bn32.running_mean.copy_(bn.running_mean);
  bn32.running_var.copy_(bn.running_var);
  bn32.eval();
  const Tensor in_eval = x.detach().requires_grad_(true), in_eval32 = f32(x).detach().requires_grad_(true);
  const Tensor eval_out = bn.forward(in_eval), eval_out32 = bn32.forward(in_eval32);
  expect_rounded_once(eval_out, eval_out32, f, 4 * kU32 * max_abs(eval_out32), "BatchNorm2d eval");
  sum(eval_out).backward();
  sum(eval_out32).backward();
  EXPECT_EQ(in_eval.grad().dtype(), dt);
  expect_rounded_once(in_eval.grad(), in_eval32.grad(), f, 4 * kU32 * max_abs(in_eval32.grad()), "eval backward");
}

TEST(Ops16bitRange, F16BatchNormOfLargeValuesHasFiniteF32Statistics) {
  // Values near 60000 (multiples of 32, f16's spacing there): their sum and the squared
  // deviations 1024^2 are beyond f16, but the statistics are accumulated in double, kept in f32.
  const Tensor x = from_vector({60000, 61024, 58976, 60000}, {4, 1}).to(DType::f16);
  const auto [mean, invstd] = cpu::batch_norm_stats_kernel(x, 1e-5);
  EXPECT_EQ(mean.item(), 60000.0);
  EXPECT_FLOAT_EQ(invstd.item<float>(), static_cast<float>(1.0 / std::sqrt(524288.0 + 1e-5)));
  const std::vector<double> out = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true).to_vector<double>();
  EXPECT_NEAR(out[1], std::sqrt(2.0), std::sqrt(2.0) * 0x1p-11);
}

// ---- dropout -------------------------------------------------------------------------------

TEST_P(Ops16bit, DropoutDropsTheSameElementsAndScalesByTheRoundedScale) {
  const double p = 0.3, scale = 1.0 / (1.0 - p);
  const Tensor mask = empty({50, 40}, opts(dt)), mask32 = empty({50, 40});
  Generator a(22), b(22);
  cpu::dropout_mask_kernel(mask, p, scale, &a);
  cpu::dropout_mask_kernel(mask32, p, scale, &b);
  // The same draws: the same elements kept, each holding the scale rounded to 16 bits.
  EXPECT_EQ(mask.to_vector<double>(), mask32.to(dt).to_vector<double>());

  const Tensor x = random16({50, 40}, dt, 23);
  Generator c(24), d(24);
  const Tensor out = dropout(x, p, true, &c), out32 = dropout(f32(x), p, true, &d);
  EXPECT_EQ(out.dtype(), dt);
  // Two roundings, the scale's (in the mask) and the product's: (2u + u^2) |y|, and the f32
  // product's own u32 |y|, together within (2 + 2u) u |y|.
  expect_rounded_once(out, out32, f, 0.0, "dropout", 2.0 + 2.0 * f.u);
}

// ---- a kernel with no 16-bit version ---------------------------------------------------------

TEST_P(Ops16bit, KernelWithout16BitVersionNamesTheOpAndTheDtype) {
  // Running statistics are f32: batch_norm converts 16-bit ones before the update kernel runs.
  const Tensor running = zeros({3}, opts(dt));
  expect_error([&] { cpu::batch_norm_update_stats_kernel(running, running, zeros({3}), ones({3}), 1e-5, 10, 0.1); },
               std::string("batch_norm: has no ") + dtype_name(dt) + " kernel; expected a f32 or f64 tensor");
}
