// matmul and linear: values against naive triple loops (2-D, transposed views, batched,
// broadcast batches, vectors), gradients against finite differences, and the error messages.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// The textbook product of row-major (M, K) and (K, N) matrices.
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t M, int64_t K,
                                 int64_t N) {
  std::vector<double> c(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) c[i * N + j] += a[i * K + k] * b[k * N + j];
  return c;
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

Tensor randn_f32(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, TensorOptions(), &g);
}

// Checks a 2-D product against the naive loops; the sizes pick gemm's small or blocked path.
void check_2d(int64_t M, int64_t K, int64_t N) {
  Tensor a = randn_f32({M, K}, 1), b = randn_f32({K, N}, 2);
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{M, N}));
  expect_near(c.to_vector<double>(), naive_matmul(a.to_vector<double>(), b.to_vector<double>(), M, K, N), 1e-4);
}

}  // namespace

TEST(Matmul, HandComputed2x2) {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector({5, 6, 7, 8}, {2, 2});
  EXPECT_EQ(matmul(a, b).to_vector<double>(), (std::vector<double>{19, 22, 43, 50}));
}

TEST(Matmul, MatchesNaiveLoops2D) {
  check_2d(5, 7, 3);     // small: gemm's direct loop
  check_2d(70, 50, 40);  // large: gemm's packed, blocked path
  check_2d(1, 300, 1);   // a dot product in disguise
}

TEST(Matmul, TransposedViewsAreReadThroughTheirStrides) {
  // a.t() and b.t() are views with swapped strides: no copy is made, the values must still be right.
  const int64_t M = 33, K = 45, N = 27;
  Tensor at = randn_f32({K, M}, 3), bt = randn_f32({N, K}, 4);
  Tensor a = at.t(), b = bt.t();
  ASSERT_FALSE(a.is_contiguous());
  ASSERT_FALSE(b.is_contiguous());
  expect_near(matmul(a, b).to_vector<double>(), naive_matmul(a.to_vector<double>(), b.to_vector<double>(), M, K, N),
              1e-4);
  // A sliced operand (row stride larger than its width) works too.
  Tensor wide = randn_f32({M, 2 * K}, 5);
  Tensor left = wide.slice(1, 0, K);
  expect_near(matmul(left, b).to_vector<double>(),
              naive_matmul(left.to_vector<double>(), b.to_vector<double>(), M, K, N), 1e-4);
}

TEST(Matmul, Batched3D) {
  const int64_t B = 3, M = 4, K = 5, N = 6;
  Tensor a = randn_f32({B, M, K}, 6), b = randn_f32({B, K, N}, 7);
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{B, M, N}));
  for (int64_t i = 0; i < B; ++i) {
    expect_near(c[i].to_vector<double>(), naive_matmul(a[i].to_vector<double>(), b[i].to_vector<double>(), M, K, N),
                1e-5);
  }
}

TEST(Matmul, BroadcastBatch) {
  const int64_t B = 3, M = 4, K = 5, N = 6;
  Tensor a3 = randn_f32({B, M, K}, 8), b2 = randn_f32({K, N}, 9);
  Tensor a2 = randn_f32({M, K}, 10), b3 = randn_f32({B, K, N}, 11);
  // (B, M, K) x (K, N): every matrix of the batch times the same b.
  Tensor c = matmul(a3, b2);
  ASSERT_EQ(c.shape(), (Shape{B, M, N}));
  for (int64_t i = 0; i < B; ++i) {
    expect_near(c[i].to_vector<double>(), naive_matmul(a3[i].to_vector<double>(), b2.to_vector<double>(), M, K, N),
                1e-5);
  }
  // (M, K) x (B, K, N): the same a for every matrix of b.
  c = matmul(a2, b3);
  ASSERT_EQ(c.shape(), (Shape{B, M, N}));
  for (int64_t i = 0; i < B; ++i) {
    expect_near(c[i].to_vector<double>(), naive_matmul(a2.to_vector<double>(), b3[i].to_vector<double>(), M, K, N),
                1e-5);
  }
  // (2, 1, M, K) x (B, K, N) -> (2, B, M, N): batch dimensions broadcast like elementwise ops.
  Tensor a4 = randn_f32({2, 1, M, K}, 12);
  c = matmul(a4, b3);
  ASSERT_EQ(c.shape(), (Shape{2, B, M, N}));
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      expect_near(c[i][j].to_vector<double>(),
                  naive_matmul(a4[i][0].to_vector<double>(), b3[j].to_vector<double>(), M, K, N), 1e-5);
    }
  }
}

TEST(Matmul, VectorsDropTheirDimension) {
  Tensor m = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v3 = from_vector({1, 0, -1}, {3});
  Tensor v2 = from_vector({1, -1}, {2});
  Tensor mv = matmul(m, v3);  // (2, 3) x (3) -> (2)
  EXPECT_EQ(mv.shape(), (Shape{2}));
  EXPECT_EQ(mv.to_vector<double>(), (std::vector<double>{-2, -2}));
  Tensor vm = matmul(v2, m);  // (2) x (2, 3) -> (3)
  EXPECT_EQ(vm.shape(), (Shape{3}));
  EXPECT_EQ(vm.to_vector<double>(), (std::vector<double>{-3, -3, -3}));
  Tensor dot = matmul(v3, v3);  // (3) x (3) -> ()
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_EQ(dot.item(), 2.0);
}

TEST(Matmul, GradcheckMatrices) {
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                        {random_input({3, 4}, 1), random_input({4, 5}, 2)}));
  // Through transposed views: backward must route dC B^T and A^T dC back through the views.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].t()); },
                        {random_input({4, 3}, 3), random_input({5, 4}, 4)}));
  // Large enough for gemm's blocked path in both forward and backward.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                        {random_input({40, 30}, 5), random_input({30, 35}, 6)}));
}

TEST(Matmul, GradcheckBatchedAndBroadcast) {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  EXPECT_TRUE(gradcheck(mm, {random_input({2, 3, 4}, 7), random_input({2, 4, 5}, 8)}));
  EXPECT_TRUE(gradcheck(mm, {random_input({2, 3, 4}, 9), random_input({4, 5}, 10)}));
  EXPECT_TRUE(gradcheck(mm, {random_input({3, 4}, 11), random_input({2, 4, 5}, 12)}));
  EXPECT_TRUE(gradcheck(mm, {random_input({2, 1, 3, 4}, 13), random_input({3, 4, 2}, 14)}));
}

TEST(Matmul, GradcheckVectors) {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  EXPECT_TRUE(gradcheck(mm, {random_input({3, 4}, 15), random_input({4}, 16)}));
  EXPECT_TRUE(gradcheck(mm, {random_input({4}, 17), random_input({2, 4, 3}, 18)}));
  EXPECT_TRUE(gradcheck(mm, {random_input({4}, 19), random_input({4}, 20)}));
}

TEST(Matmul, OnlyInputsThatRequireGradGetOne) {
  Tensor a = random_input({3, 4}, 21, /*requires_grad=*/false);
  Tensor b = random_input({4, 2}, 22);
  sum(matmul(a, b)).backward();
  EXPECT_FALSE(a.grad().defined());
  // d(sum(a b))/db[k][j] = sum_i a[i][k], the same for every column j.
  const std::vector<double> column_sums = sum(a, {0}).to_vector<double>();
  const std::vector<double> grad = b.grad().to_vector<double>();
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(grad[k * 2], column_sums[k], 1e-12);
    EXPECT_NEAR(grad[k * 2 + 1], column_sums[k], 1e-12);
  }
}

TEST(Matmul, ErrorMessages) {
  EXPECT_EQ(error_message([] { matmul(zeros({2, 3}), zeros({4, 5})); }),
            "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_message([] { matmul(zeros({2, 3, 4}), zeros({2, 5, 6})); }),
            "matmul: shapes [2, 3, 4] and [2, 5, 6] cannot be multiplied (4 != 5)");
  expect_error([] { matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); }, "cannot be broadcast");
  expect_error([] { matmul(zeros({}), zeros({3})); }, "at least 1 dimension");
  expect_error([] { matmul(zeros({2, 2}), zeros({2, 2}, TensorOptions().dtype(DType::f64))); }, "dtype");
  expect_error(
      [] {
        matmul(zeros({2, 2}, TensorOptions().dtype(DType::i64)), zeros({2, 2}, TensorOptions().dtype(DType::i64)));
      },
      "matmul: expected a floating tensor, got i64");
}

TEST(Linear, MatchesNaiveLoops) {
  const int64_t rows = 5, in = 7, out = 3;
  Tensor x = randn_f32({rows, in}, 30), w = randn_f32({out, in}, 31), b = randn_f32({out}, 32);
  // y = x W^T + b, with W^T built by hand.
  const std::vector<double> wv = w.to_vector<double>();
  std::vector<double> wt(in * out);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) wt[i * out + o] = wv[o * in + i];
  std::vector<double> expected = naive_matmul(x.to_vector<double>(), wt, rows, in, out);
  expect_near(linear(x, w).to_vector<double>(), expected, 1e-5);
  const std::vector<double> bv = b.to_vector<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) expected[r * out + o] += bv[o];
  expect_near(linear(x, w, b).to_vector<double>(), expected, 1e-5);
}

TEST(Linear, LeadingDimensionsAreRows) {
  Tensor x = randn_f32({2, 3, 4}, 33), w = randn_f32({5, 4}, 34), b = randn_f32({5}, 35);
  Tensor y = linear(x, w, b);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  expect_near(y.to_vector<double>(), linear(x.reshape({6, 4}), w, b).to_vector<double>(), 1e-6);
  EXPECT_EQ(linear(x[0][0], w, b).shape(), (Shape{5}));  // a single 1-D sample
}

TEST(Linear, Gradcheck) {
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                        {random_input({4, 3}, 36), random_input({2, 3}, 37), random_input({2}, 38)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); },
                        {random_input({4, 3}, 39), random_input({2, 3}, 40)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                        {random_input({2, 3, 4}, 41), random_input({5, 4}, 42), random_input({5}, 43)}));
  // Large enough for gemm's blocked path.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                        {random_input({33, 40}, 44), random_input({30, 40}, 45), random_input({30}, 46)}));
}

TEST(Linear, ErrorMessages) {
  EXPECT_EQ(error_message([] { linear(zeros({8, 784}), zeros({10, 100})); }),
            "linear: input has 784 features (shape [8, 784]) but weight expects 100 (weight shape [10, 100])");
  expect_error([] { linear(zeros({8, 4}), zeros({4})); }, "expected weight to be 2-D");
  expect_error([] { linear(zeros({8, 4}), zeros({3, 4}), zeros({4})); }, "expected bias of shape [3]");
}
