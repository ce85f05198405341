// matmul, linear and the GEMM underneath them on the GPU against the CPU, forward and backward,
// with both GEMM backends (cuBLAS and the tiled kernel) and f32 and f64: 2-D products of odd
// sizes, batched and broadcast batches, vectors, transposed, strided and broadcast operands,
// empty products, alpha/beta; and the tiled kernel against cuBLAS on larger sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "gpu_test_util.h"
#include "lockstep.h"
#include "core/cuda/device_guard.h"
#include "tensor/ops/cuda/gemm.h"

using namespace lockstep;
using namespace lockstep::test;
using cuda::GemmBackend;

namespace {

// A random CPU input that requires grad.
Tensor input(const Shape& shape, uint64_t seed, DType dtype) {
  return random_cpu(shape, seed, dtype).requires_grad_(true);
}

std::string sizes(int64_t M, int64_t K, int64_t N) {
  return std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
}

// Checks fn(a, b) on the GPU against the CPU; its longest sum has `terms` products.
void check(const std::function<Tensor(const Tensor&, const Tensor&)>& fn, const Tensor& a, const Tensor& b,
           int64_t terms, const std::string& what) {
  expect_parity([&fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); }, {a, b},
                rtol(a.dtype(), terms), atol(a.dtype(), terms), what);
}

Tensor plain_matmul(const Tensor& a, const Tensor& b) { return matmul(a, b); }

struct Product {
  int64_t M, K, N;
};
// Odd sizes around the tiled kernel's 64 x 64 x 16 tiles, degenerate rows and columns included.
const Product kProducts[] = {{1, 1, 1}, {7, 13, 5}, {129, 65, 33}, {64, 64, 64}, {1, 200, 3}, {65, 1, 66}, {3, 17, 1}};

}  // namespace

TEST(GpuMatmul, BackendCanBeSelected) {
  const GemmBackend saved = cuda::gemm_backend();
  cuda::set_gemm_backend(GemmBackend::Tiled);
  EXPECT_EQ(cuda::gemm_backend(), GemmBackend::Tiled);
  cuda::set_gemm_backend(GemmBackend::Cublas);
  EXPECT_EQ(cuda::gemm_backend(), GemmBackend::Cublas);
  cuda::set_gemm_backend(saved);
}

TEST(GpuMatmul, MatricesOfOddSizes) {
  for_each_setting([](DType dtype, const std::string& setting) {
    for (Product p : kProducts) {
      // The backward sums over N (dA) and M (dB), the forward over K.
      check(plain_matmul, input({p.M, p.K}, 11, dtype), input({p.K, p.N}, 12, dtype), std::max({p.M, p.K, p.N}),
            setting + " " + sizes(p.M, p.K, p.N));
    }
  });
}

TEST(GpuMatmul, TransposedOperands) {
  // The views are taken on the device, so the GEMM itself sees the swapped strides (cuBLAS:
  // CUBLAS_OP_T instead of a copy; the tiled kernel: column-wise loads).
  for_each_setting([](DType dtype, const std::string& setting) {
    for (Product p : {Product{7, 13, 5}, Product{129, 65, 33}}) {
      const std::string what = setting + " " + sizes(p.M, p.K, p.N);
      const int64_t terms = std::max({p.M, p.K, p.N});
      const Tensor a = input({p.M, p.K}, 21, dtype), at = input({p.K, p.M}, 22, dtype);
      const Tensor b = input({p.K, p.N}, 23, dtype), bt = input({p.N, p.K}, 24, dtype);
      check([](const Tensor& x, const Tensor& y) { return matmul(x.t(), y); }, at, b, terms, what + " A^T B");
      check([](const Tensor& x, const Tensor& y) { return matmul(x, y.t()); }, a, bt, terms, what + " A B^T");
      check([](const Tensor& x, const Tensor& y) { return matmul(x.t(), y.t()); }, at, bt, terms, what + " A^T B^T");
    }
  });
}

TEST(GpuMatmul, OperandsWithoutAUnitStride) {
  // Every other row and column (neither stride is 1), and a row broadcast down a matrix (row
  // stride 0): cuBLAS cannot read these directly and gets a contiguous copy.
  for_each_setting([](DType dtype, const std::string& setting) {
    const auto every_other = [](const Tensor& x) { return x.slice(0, 0, x.size(0), 2).slice(1, 0, x.size(1), 2); };
    check([&](const Tensor& x, const Tensor& y) { return matmul(every_other(x), every_other(y)); },
          input({14, 26}, 31, dtype), input({26, 10}, 32, dtype), 13, setting + " every other row and column");
    check([&](const Tensor& x, const Tensor& y) { return matmul(every_other(x).t(), y.expand({7, 9})); },
          input({14, 26}, 33, dtype), input({1, 9}, 34, dtype), 13, setting + " transposed slice x broadcast row");
    check([](const Tensor& x, const Tensor& y) { return matmul(x.expand({6, 5}), y); }, input({6, 1}, 35, dtype),
          input({5, 4}, 36, dtype), 6, setting + " broadcast column");
  });
}

TEST(GpuMatmul, BatchedAndBroadcastBatches) {
  for_each_setting([](DType dtype, const std::string& setting) {
    check(plain_matmul, input({3, 7, 13}, 41, dtype), input({3, 13, 5}, 42, dtype), 21, setting + " (3,7,13)x(3,13,5)");
    check(plain_matmul, input({2, 1, 9, 6}, 43, dtype), input({3, 6, 11}, 44, dtype), 33,
          setting + " (2,1,9,6)x(3,6,11)");
    check(plain_matmul, input({9, 6}, 45, dtype), input({4, 6, 11}, 46, dtype), 44, setting + " (9,6)x(4,6,11)");
    // (..., M, K) x (K, N) folds the batch into the rows: one GEMM of 4 * 9 rows.
    check(plain_matmul, input({4, 9, 6}, 47, dtype), input({6, 11}, 48, dtype), 36, setting + " (4,9,6)x(6,11)");
    // A batched product of transposed matrices.
    check([](const Tensor& x, const Tensor& y) { return matmul(x.transpose(-2, -1), y); }, input({3, 13, 7}, 49, dtype),
          input({3, 13, 5}, 50, dtype), 13, setting + " (3,13,7)^T x (3,13,5)");
  });
}

TEST(GpuMatmul, Vectors) {
  for_each_setting([](DType dtype, const std::string& setting) {
    check(plain_matmul, input({13}, 51, dtype), input({13, 5}, 52, dtype), 13, setting + " (13)x(13,5)");
    check(plain_matmul, input({7, 13}, 53, dtype), input({13}, 54, dtype), 13, setting + " (7,13)x(13)");
    check(plain_matmul, input({13}, 55, dtype), input({13}, 56, dtype), 13, setting + " (13)x(13)");
    check(plain_matmul, input({3, 7, 13}, 57, dtype), input({13}, 58, dtype), 21, setting + " (3,7,13)x(13)");
    check(plain_matmul, input({13}, 59, dtype), input({3, 13, 5}, 60, dtype), 13, setting + " (13)x(3,13,5)");
  });
}

TEST(GpuMatmul, EmptyProducts) {
  // K == 0 gives zeros (a sum of nothing); M == 0 or N == 0 gives an empty result.
  for_each_setting([](DType dtype, const std::string& setting) {
    check(plain_matmul, input({3, 0}, 61, dtype), input({0, 4}, 62, dtype), 1, setting + " K = 0");
    check(plain_matmul, input({0, 5}, 63, dtype), input({5, 4}, 64, dtype), 5, setting + " M = 0");
    check(plain_matmul, input({3, 5}, 65, dtype), input({5, 0}, 66, dtype), 5, setting + " N = 0");
    check(plain_matmul, input({0, 3, 5}, 67, dtype), input({0, 5, 4}, 68, dtype), 5, setting + " empty batch");
  });
}

TEST(GpuMatmul, LinearWithAndWithoutBias) {
  for_each_setting([](DType dtype, const std::string& setting) {
    const Tensor x = input({5, 7, 13}, 71, dtype), w = input({9, 13}, 72, dtype), b = input({9}, 73, dtype);
    // The weight gradient sums over the 35 rows.
    expect_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b},
                  rtol(dtype, 35), atol(dtype, 35), setting + " linear with bias");
    expect_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w}, rtol(dtype, 35),
                  atol(dtype, 35), setting + " linear without bias");
    const Tensor x1 = input({130, 70}, 74, dtype), w1 = input({33, 70}, 75, dtype), b1 = input({33}, 76, dtype);
    expect_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x1, w1, b1},
                  rtol(dtype, 130), atol(dtype, 130), setting + " linear 130x70 -> 33");
    // No input features: the GEMM adds nothing (K = 0) and every row is the bias.
    const Tensor x0 = input({4, 0}, 77, dtype), w0 = input({3, 0}, 78, dtype), b0 = input({3}, 79, dtype);
    expect_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x0, w0, b0},
                  rtol(dtype, 4), atol(dtype, 4), setting + " linear with 0 input features");
  });
}

TEST(GpuMatmul, GemmScalesAndNeverReadsCWhenBetaIsZero) {
  // The GEMM kernel directly: C = alpha A B + beta C for alpha and beta other than 1 and 0, and
  // beta = 0 over a C full of NaN (which must not leak into the result).
  for_each_setting([](DType dtype, const std::string& setting) {
    const int64_t M = 37, K = 29, N = 41;
    const Tensor a = random_cpu({M, K}, 81, dtype), b = random_cpu({K, N}, 82, dtype);
    const Tensor c = random_cpu({M, N}, 83, dtype);
    const Tensor ga = a.to(gpu()), gb = b.to(gpu()), gc = c.to(gpu());
    const TensorOptions on_gpu = TensorOptions().dtype(dtype).device(gpu());
    const Tensor nan = full({M, N}, std::numeric_limits<double>::quiet_NaN(), on_gpu);
    if (dtype == DType::f32) {
      cuda::gemm(M, N, K, 0.5f, ga.data_ptr<float>(), K, 1, gb.data_ptr<float>(), N, 1, -2.0f,
                 gc.data_ptr<float>(), N);
      cuda::gemm(M, N, K, 0.5f, ga.data_ptr<float>(), K, 1, gb.data_ptr<float>(), N, 1, 0.0f,
                 nan.data_ptr<float>(), N);
    } else {
      cuda::gemm(M, N, K, 0.5, ga.data_ptr<double>(), K, 1, gb.data_ptr<double>(), N, 1, -2.0,
                 gc.data_ptr<double>(), N);
      cuda::gemm(M, N, K, 0.5, ga.data_ptr<double>(), K, 1, gb.data_ptr<double>(), N, 1, 0.0,
                 nan.data_ptr<double>(), N);
    }
    const Tensor product = matmul(a, b) * 0.5;
    expect_close(product - c * 2.0, gc, rtol(dtype, K), atol(dtype, K), setting + " alpha 0.5, beta -2");
    expect_close(product, nan, rtol(dtype, K), atol(dtype, K), setting + " beta 0 over NaN");
  });
}

TEST(GpuMatmul, BatchedGemmSharesAMatrixWithBatchStrideZero) {
  // gemm_batched with A's batch stride 0: C_p = W B_p, as conv2d uses it.
  for_each_setting([](DType dtype, const std::string& setting) {
    const int64_t batch = 5, M = 6, K = 19, N = 70;
    const Tensor w = random_cpu({M, K}, 91, dtype), b = random_cpu({batch, K, N}, 92, dtype);
    const Tensor gw = w.to(gpu()), gb = b.to(gpu());
    const Tensor gc = empty({batch, M, N}, TensorOptions().dtype(dtype).device(gpu()));
    // gemm_batched runs on the current device, which the guard makes gpu().
    const cuda::DeviceGuard guard(gpu());
    if (dtype == DType::f32) {
      cuda::gemm_batched(batch, M, N, K, 1.0f, gw.data_ptr<float>(), 0, K, 1, gb.data_ptr<float>(), K * N, N, 1,
                         0.0f, gc.data_ptr<float>(), M * N, N);
    } else {
      cuda::gemm_batched(batch, M, N, K, 1.0, gw.data_ptr<double>(), 0, K, 1, gb.data_ptr<double>(), K * N, N,
                         1, 0.0, gc.data_ptr<double>(), M * N, N);
    }
    expect_close(matmul(w, b), gc, rtol(dtype, K), atol(dtype, K), setting + " shared A");
  });
}

TEST(GpuMatmul, TiledKernelMatchesCublasOnLargeProducts) {
  // Both backends on the same GPU inputs, larger than the CPU comparisons: many tiles, partial
  // edge tiles in every dimension, a transposed operand, and a batch.
  const GemmBackend saved = cuda::gemm_backend();
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor a = random_cpu({517, 1031}, 101, dtype).to(gpu());
    const Tensor b = random_cpu({1031, 770}, 102, dtype).to(gpu());
    const Tensor bt = random_cpu({770, 1031}, 103, dtype).to(gpu());
    const Tensor a3 = random_cpu({4, 300, 257}, 104, dtype).to(gpu());
    const Tensor b3 = random_cpu({4, 257, 190}, 105, dtype).to(gpu());
    const auto run = [&](GemmBackend backend) {
      cuda::set_gemm_backend(backend);
      return std::vector<Tensor>{matmul(a, b), matmul(a, bt.t()), matmul(a3, b3)};
    };
    const std::vector<Tensor> cublas = run(GemmBackend::Cublas), tiled = run(GemmBackend::Tiled);
    const std::string what = std::string("tiled vs cuBLAS ") + dtype_name(dtype);
    expect_close(cublas[0], tiled[0], rtol(dtype, 1031), atol(dtype, 1031), what + " 517x1031x770");
    expect_close(cublas[1], tiled[1], rtol(dtype, 1031), atol(dtype, 1031), what + " 517x1031x770, B transposed");
    expect_close(cublas[2], tiled[2], rtol(dtype, 257), atol(dtype, 257), what + " 4 x 300x257x190");
  }
  cuda::set_gemm_backend(saved);
}
