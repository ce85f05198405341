// Elementwise ops and reductions: values, broadcasting, gradients (finite differences in f64),
// and the errors a student will meet first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "tensor/ops/dispatch/elementwise_kernels.h"
#include "tensor/ops/dispatch/relu_kernels.h"
#include "tensor/strided_loop.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

TEST(Elementwise, BroadcastingFollowsNumPy) {
  Tensor a = from_vector({1, 2, 3}, {3, 1});
  Tensor b = from_vector({10, 20}, {2});
  Tensor c = a + b;  // (3, 1) + (2,) -> (3, 2)
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, 21, 12, 22, 13, 23}));
  EXPECT_EQ((b - 1.0).to_vector<float>(), (std::vector<float>{9, 19}));
  EXPECT_EQ((1.0 - b).to_vector<float>(), (std::vector<float>{-9, -19}));
  EXPECT_EQ((b / 4.0).to_vector<float>(), (std::vector<float>{2.5, 5}));
  EXPECT_EQ((2.0 * a.t() * a.t()).shape(), (Shape{1, 3}));
}

// Every loop walks its operands after merging the dimensions they share (a dense tensor is one
// row) and cuts long rows into pieces for the threads: check that each element is visited once,
// at the right place, for dense tensors longer than a piece, permuted views and broadcasts.
TEST(Elementwise, LongRowsAndStridedViewsVisitEveryElementOnce) {
  const TensorOptions f64 = TensorOptions().dtype(DType::f64);
  const int64_t n = 5 * 8 * 1001;  // more than kRowPiece and kParallelGrain
  Tensor x = arange(0, static_cast<double>(n), 1, f64).reshape({5, 8, 1001});
  const auto doubled = (x * 2.0 + 1.0).to_vector<double>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(doubled[i], 2.0 * i + 1) << "element " << i;

  // A permuted view: element (k, i, j) of xp is x[i, j, k] = (i * 8 + j) * 1001 + k.
  Tensor xp = x.permute({2, 0, 1});
  const auto negated = neg(xp).to_vector<double>();
  for (int64_t k = 0; k < 1001; ++k)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 8; ++j)
        ASSERT_EQ(negated[(k * 5 + i) * 8 + j], -static_cast<double>((i * 8 + j) * 1001 + k));
  EXPECT_EQ(xp.contiguous().to_vector<double>(), (xp * 1.0).to_vector<double>());

  // A broadcast operand: b (8, 1) steps by 0 along the last dimension.
  Tensor b = arange(0, 8, 1, f64).reshape({8, 1});
  const auto sums = (x + b).to_vector<double>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sums[i], static_cast<double>(i + (i / 1001) % 8)) << "element " << i;

  // fill_ and a sum over the outer and inner dimensions of a view (as for a bias gradient).
  Tensor filled = zeros({5, 8, 1001}, f64).transpose(0, 2);
  filled.fill_(3.0);
  EXPECT_EQ(sum(filled).item(), 3.0 * n);
  const auto per_channel = sum(x, {0, 2}).to_vector<double>();
  for (int64_t j = 0; j < 8; ++j) {
    double want = 0;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t k = 0; k < 1001; ++k) want += static_cast<double>((i * 8 + j) * 1001 + k);
    EXPECT_EQ(per_channel[j], want) << "channel " << j;
  }
}

TEST(Elementwise, ValuesOfActivations) {
  Tensor x = from_vector({-2.0, 0.0, 0.5}, {3}, TensorOptions().dtype(DType::f64));
  const auto r = relu(x).to_vector<double>();
  EXPECT_EQ(r, (std::vector<double>{0.0, 0.0, 0.5}));
  EXPECT_NEAR(sigmoid(x).to_vector<double>()[0], 1.0 / (1.0 + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(tanh(x).to_vector<double>()[2], std::tanh(0.5), 1e-15);
  EXPECT_NEAR(log(exp(x)).to_vector<double>()[2], 0.5, 1e-15);
}

// ReLU passes NaN through, forward and backward, as PyTorch does: a NaN that vanished into a
// zero would hide a diverging training run.
TEST(Elementwise, ReluKeepsNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector({nan, -1.0, 2.0}, {3}, TensorOptions().dtype(DType::f64)).requires_grad_();
  const Tensor y = relu(x);
  const auto out = y.to_vector<double>();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 2.0);
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1.0, 0.0, 1.0}));
}

// relu keeps, for its backward pass, one bit per element instead of its output
// (tensor/ops/rules/relu_mask.h): bit i % 8 of byte i / 8, set where element i is > 0 or
// NaN, and 0 past the last element. Its output has the bits of the plain elementwise relu.
// 37 values: two vectors of 16 f32 or one of 32 16-bit elements (the AVX-512 loops), a tail of
// 5 and a part-filled word. A NaN with its sign bit set passes too.
std::vector<double> relu_test_values(int64_t n) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {-1.5, 0.0, -0.0, 2.5, nan, inf, -inf, 1e-30, -3e-8, 0.75, -7.0, -nan};
  std::vector<double> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) values[i] = specials[(i * 7) % specials.size()];
  return values;
}

TEST(Elementwise, ReluMaskHasOneBitPerElementThatPasses) {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const Tensor x = from_vector(relu_test_values(37), {37}, TensorOptions().dtype(dtype));
    // What x holds once rounded to its dtype (1e-30 is 0 in f16).
    const std::vector<double> held = x.to(DType::f64).to_vector<double>();
    const Tensor out = empty({37}, TensorOptions().dtype(dtype));
    const Tensor mask = empty({relu_mask_bytes(37)}, TensorOptions().dtype(DType::u8));
    ASSERT_EQ(mask.numel(), 8);
    cpu::relu_kernel(x, out, mask);
    const Tensor plain = empty({37}, TensorOptions().dtype(dtype));
    cpu::unary_kernel("relu", UnaryOp::Relu, x, plain);
    EXPECT_EQ(std::memcmp(out.data(), plain.data(), static_cast<size_t>(out.nbytes())), 0) << dtype_name(dtype);
    const uint8_t* bytes = mask.data_ptr<uint8_t>();
    for (int64_t i = 0; i < 64; ++i) {
      const bool bit = (bytes[i / 8] >> (i % 8)) & 1;
      const bool passes = i < 37 && !(held[static_cast<size_t>(i)] <= 0.0);
      EXPECT_EQ(bit, passes) << dtype_name(dtype) << " element " << i;
    }
  }
}

// The gradient passes where the input was > 0 or NaN and is +0 elsewhere, whatever it is: a
// NaN, an infinity or a -0 passes unchanged. On a transposed input too (relu copies it
// first), and over a tensor that several threads share in pieces.
TEST(Elementwise, ReluGradientPassesWhereTheMaskIsSet) {
  const auto same = [](double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
  };
  const int threads = get_num_threads();
  set_num_threads(2);
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const int64_t n : {int64_t{37}, 3 * kRowPiece + 21}) {
      const TensorOptions options = TensorOptions().dtype(dtype);
      const Tensor x = from_vector(relu_test_values(2 * n), {n, 2}, options).requires_grad_();
      std::vector<double> g_values = relu_test_values(2 * n + 3);
      g_values.erase(g_values.begin(), g_values.begin() + 3);
      const Tensor g = from_vector(g_values, {2, n}, options);
      relu(x.t()).backward(g);
      const std::vector<double> held = x.detach().to(DType::f64).to_vector<double>();
      const std::vector<double> g_held = g.to(DType::f64).to_vector<double>();
      const std::vector<double> grad = x.grad().to(DType::f64).to_vector<double>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < 2; ++j) {
          const size_t at = static_cast<size_t>(i * 2 + j);  // x's (i, j) is the output's (j, i)
          const double want = held[at] <= 0.0 ? 0.0 : g_held[static_cast<size_t>(j * n + i)];
          if (!same(grad[at], want)) ++wrong;
        }
      }
      EXPECT_EQ(wrong, 0) << dtype_name(dtype) << ", " << n << " x 2 values";
    }
  }
  set_num_threads(threads);
}

// relu's backward reads its mask, not its output: an output changed in place afterwards (under
// NoGradGuard, the only place it may be) does not change the gradient. PyTorch, which saves the
// output, refuses such a backward instead (docs/conventions.md).
TEST(Elementwise, ReluOutputChangedInPlaceKeepsTheGradient) {
  const Tensor x = from_vector({-1.0, 2.0, 3.0, 0.0}, {4}).requires_grad_();
  const Tensor y = relu(x);
  {
    NoGradGuard no_grad;
    y.fill_(-5.0);
  }
  sum(y * from_vector({10.0, 20.0, 30.0, 40.0}, {4})).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.0f, 20.0f, 30.0f, 0.0f}));
}

// relu_ writes over its input and records ReluBackward on it: the tensor's grad_fn moves on
// from the op that made it, and the gradient is relu's. Without recording it simply applies.
TEST(Elementwise, ReluInPlaceIsRecordedLikeRelu) {
  const Tensor w = from_vector({1.0, -2.0, 3.0, -4.0}, {4}).requires_grad_();
  const Tensor h = w * 2.0;
  const Tensor& out = relu_(h);
  EXPECT_EQ(&out, &h);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{2.0f, 0.0f, 6.0f, 0.0f}));
  EXPECT_EQ(h.grad_fn()->name(), "ReluBackward");
  EXPECT_EQ(h.version(), 1);
  sum(h * from_vector({1.0, 2.0, 3.0, 4.0}, {4})).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2.0f, 0.0f, 6.0f, 0.0f}));

  const Tensor plain = from_vector({-1.0, 5.0}, {2});
  relu_(plain);
  EXPECT_EQ(plain.to_vector<float>(), (std::vector<float>{0.0f, 5.0f}));
}

// What relu_ refuses while recording, each with a sentence that says to use relu: a leaf (its
// gradient would be for values it no longer holds), a tensor with a view on its memory, and a
// tensor an op saved for backward (mul saves the other factor).
TEST(Elementwise, ReluInPlaceRefusesWhatCouldGiveAWrongGradient) {
  const Tensor w = from_vector({1.0, -2.0}, {2}).requires_grad_();
  expect_error([&] { relu_(w); }, "relu_: a leaf tensor that requires grad cannot be changed in place");
  const Tensor h = w * 2.0;
  const Tensor view = h.view({1, 2});
  expect_error([&] { relu_(h); }, "share its memory with no other tensor");
  const Tensor k = w * 3.0;
  const Tensor product = k * w;  // saves k, for w's gradient
  expect_error([&] { relu_(k); }, "got a tensor that shares its memory; use relu");
}

TEST(Elementwise, ComparisonsGiveBool) {
  Tensor a = from_vector({1, 2, 3}, {3}), b = from_vector({2, 2, 2}, {3});
  EXPECT_EQ(eq(a, b).dtype(), DType::boolean);
  EXPECT_EQ(eq(a, b).to_vector<int>(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(ne(a, b).to_vector<int>(), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(lt(a, b).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(le(a, b).to_vector<int>(), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(gt(a, b).to_vector<int>(), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(ge(a, b).to_vector<int>(), (std::vector<int>{0, 1, 1}));
  // Integer labels compare too: the accuracy of a classifier.
  EXPECT_EQ(sum(eq(from_vector(std::vector<int64_t>{1, 2, 3}, {3}), from_vector(std::vector<int64_t>{1, 0, 3}, {3})).to(DType::f32)).item(), 2.0);
}

TEST(Elementwise, GradientsMatchFiniteDifferences) {
  const auto a = random_input({3, 4}, 1), b = random_input({3, 4}, 2);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return add(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return sub(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return mul(x[0], x[1]); }, {a, b}));
  // Keep the divisor away from zero.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return div(x[0], x[1]); }, {a, random_input({3, 4}, 3) + 3.0}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return neg(x[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return exp(x[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return log(x[0]); }, {random_input({5}, 4) + 2.0}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return relu(x[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return sigmoid(x[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return tanh(x[0]); }, {a}));
}

TEST(Elementwise, BroadcastGradientsAreSummed) {
  // (2, 3, 4) op (3, 1) and op (4,): the small operands' gradients sum over broadcast dims.
  const auto big = random_input({2, 3, 4}, 5);
  const auto col = random_input({3, 1}, 6), row = random_input({4}, 7);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return add(x[0], x[1]); }, {big, col}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return mul(x[0], x[1]); }, {big, row}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return div(x[0], x[1]); }, {big, col + 3.0}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return sub(x[1], x[0]); }, {big, row}));
}

// Two floating dtypes promote to the wider one, as in PyTorch: f32 with f64 gives f64, a 16-bit
// type with f32 gives f32, and f16 with bf16 (neither holds the other) gives f32.
TEST(Elementwise, FloatingDtypesPromoteToTheWiderOne) {
  const Tensor a = full({2}, 1.5), d = full({2}, 0.25, TensorOptions().dtype(DType::f64));
  const Tensor h = a.to(DType::f16), b = a.to(DType::bf16);
  EXPECT_EQ(mul(a, d).dtype(), DType::f64);
  EXPECT_EQ(mul(a, d).to_vector<double>(), (std::vector<double>{0.375, 0.375}));
  EXPECT_EQ(add(b, a).dtype(), DType::f32);
  EXPECT_EQ(sub(a, h).dtype(), DType::f32);
  EXPECT_EQ(div(h, b).dtype(), DType::f32);
  EXPECT_EQ(add(b, b).dtype(), DType::bf16);
  // The gradient reaches each input in its own dtype.
  const Tensor x = full({2}, 2.0, TensorOptions().requires_grad(true)).to(DType::bf16);
  const Tensor w = full({2}, 3.0, TensorOptions().requires_grad(true));
  sum(mul(x, w)).backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2.0f, 2.0f}));
}

TEST(Elementwise, Errors) {
  Tensor a = ones({2, 3});
  EXPECT_EQ(error_message([&] { add(a, ones({4})); }),
            "add: shapes [2, 3] and [4] cannot be broadcast (dimension 1 has sizes 3 and 4)");
  expect_error([&] { mul(a, ones({2, 3}, TensorOptions().dtype(DType::i64))); },
               "mul: expected all tensors to have the same dtype, got f32 and i64");
  EXPECT_THROW(add(a, Tensor()), Error);
  expect_error([] { exp(from_vector(std::vector<int64_t>{1}, {1})); }, "exp: expected a floating tensor, got i64");
  expect_error([] { add(from_vector(std::vector<int64_t>{1}, {1}), from_vector(std::vector<int64_t>{1}, {1})); }, "add: expected a floating tensor, got i64");
}

TEST(Reduce, SumAndMeanOverDims) {
  Tensor x = arange(0, 24, 1, TensorOptions().dtype(DType::f64)).reshape({2, 3, 4});
  EXPECT_EQ(sum(x).item(), 276.0);
  EXPECT_EQ(sum(x, {0}).shape(), (Shape{3, 4}));
  EXPECT_EQ(sum(x, {0}).to_vector<double>()[0], 12.0);
  EXPECT_EQ(sum(x, {1, 2}).to_vector<double>(), (std::vector<double>{66.0, 210.0}));
  EXPECT_EQ(sum(x, {-1}, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(sum(x, {-1}, true).to_vector<double>()[5], 20.0 + 21 + 22 + 23);
  EXPECT_EQ(mean(x, {0, 2}).to_vector<double>(), (std::vector<double>{7.5, 11.5, 15.5}));
  EXPECT_EQ(mean(x).item(), 11.5);
  // On a transposed (non-contiguous) view.
  EXPECT_EQ(sum(x.transpose(0, 2), {0}).to_vector<double>(), sum(x, {2}).t().contiguous().to_vector<double>());
  EXPECT_THROW(sum(x, {3}), Error);
  EXPECT_THROW(sum(x, {1, 1}), Error);
}

TEST(Reduce, LargeSumsUseEveryThreadAndStayAccurate) {
  // 2^22 ones: a float accumulator would stop at 2^24 steps, a double one is exact.
  Tensor x = ones({1 << 22});
  EXPECT_EQ(sum(x).item(), static_cast<double>(1 << 22));
  EXPECT_EQ(sum(ones({3, 1 << 16}), {1}).to_vector<double>(), std::vector<double>(3, 65536.0));
}

// A sum large enough to be split over the threads gives the same bits with any thread count:
// f64, where the order of additions shows in the last bits, over a whole tensor and over a
// large slice of a non-contiguous view.
TEST(Reduce, LargeSumsGiveTheSameBitsWithAnyThreadCount) {
  const int saved_threads = get_num_threads();
  Generator gen(9);
  const Tensor x = randn({3, 200001}, TensorOptions().dtype(DType::f64), &gen);
  const std::vector<int> thread_counts{1, 2, 3, 5};
  std::vector<std::vector<double>> results;
  for (int threads : thread_counts) {
    set_num_threads(threads);
    std::vector<double> sums = sum(x, {1}).to_vector<double>();
    sums.push_back(sum(x).item());
    sums.push_back(sum(x.t()).item());
    results.push_back(sums);
  }
  set_num_threads(saved_threads);
  for (size_t k = 1; k < results.size(); ++k) {
    for (size_t i = 0; i < results[0].size(); ++i) {
      EXPECT_EQ(results[k][i], results[0][i]) << "sum " << i << " with " << thread_counts[k] << " threads";
    }
  }
}

// The sum kernel takes several runs of additions in one loop (the images of a convolution's bias
// gradient, the outputs of a linear layer's), each run summed as it would be alone: f64, where
// any change of order shows in the last bits, against the runs summed one at a time.
TEST(Reduce, RunsSummedTogetherGiveTheBitsOfEachRunAlone) {
  Generator gen(4);
  const TensorOptions f64 = TensorOptions().dtype(DType::f64);
  // A linear layer's bias gradient: dy (37, 13) over dim 0, 13 outputs of 37 strided values.
  const Tensor dy = randn({37, 13}, f64, &gen);
  const std::vector<double> columns = sum(dy, {0}).to_vector<double>();
  for (int64_t c = 0; c < 13; ++c) EXPECT_EQ(columns[c], sum(dy.select(1, c)).item()) << "output " << c;
  // A convolution's: dy (19, 3, 5, 7) over {0, 2, 3}, each channel the images' sums added in order.
  const Tensor maps = randn({19, 3, 5, 7}, f64, &gen);
  const std::vector<double> channels = sum(maps, {0, 2, 3}).to_vector<double>();
  for (int64_t c = 0; c < 3; ++c) {
    double images = 0;
    for (int64_t n = 0; n < 19; ++n) images += sum(maps.select(0, n).select(0, c)).item();
    EXPECT_EQ(channels[c], images) << "channel " << c;
  }
}

TEST(Reduce, GradientsMatchFiniteDifferences) {
  const auto x = random_input({2, 3, 4}, 8);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return sum(t[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return sum(t[0], {1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return sum(t[0], {0, 2}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return mean(t[0], {-1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& t) { return mean(t[0]); }, {x}));
}
