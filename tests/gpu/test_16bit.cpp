// The 16-bit (f16 and bf16) CUDA kernels against their CPU twins, called through the kernel
// tables (kernels::name.call) with the same random inputs on each device: the 16-bit GEMM
// (cuBLAS GemmEx) against cpu::gemm_16bit, then every kernel mixed precision runs on 16-bit
// tensors (elementwise, axpy and scale, sum, max, softmax, the losses, max pooling, batch norm,
// conv2d) and dropout's 16-bit mask, by its properties. The kernels are called directly, so these
// tests check the kernels alone, whatever the ops above them accept.
//
// Tolerances. Both devices compute a 16-bit result in float and round it once, so where their
// float values differ by a few float ulp (other math libraries, fused multiply-adds, other
// orders of addition) the rounded results can land one 16-bit ulp apart: at most eps * |value|
// for the dtype's machine epsilon eps (2^-10 for f16, 2^-7 for bf16), and twice that across a
// power of two. Results that cancel to nearly 0 show the float difference itself, about 1e-7 of
// the terms summed, hence an absolute tolerance that grows with the number of terms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gemm_test_util.h"
#include "gpu_test_util.h"
#include "lockstep.h"
#include "tensor/ops/rules/conv_geometry.h"
#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/cuda/gemm.h"
#include "tensor/ops/dispatch/batch_norm_kernels.h"
#include "tensor/ops/dispatch/conv_kernels.h"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "tensor/ops/dispatch/dropout_kernels.h"
#include "tensor/ops/dispatch/elementwise_kernels.h"
#include "tensor/ops/dispatch/loss_kernels.h"
#include "tensor/ops/dispatch/max_kernels.h"
#include "tensor/ops/dispatch/pool_kernels.h"
#include "tensor/ops/dispatch/reduce_kernels.h"
#include "tensor/ops/dispatch/softmax_kernels.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

const DType k16bit[] = {DType::f16, DType::bf16};

// The machine epsilon of a 16-bit dtype: 2^-10 for f16 (10 stored mantissa bits), 2^-7 for bf16.
double eps(DType dtype) { return dtype == DType::f16 ? 0x1p-10 : 0x1p-7; }
// One rounding of a float result, possibly at a power of two: two ulp of the result.
double rtol16(DType dtype) { return 2.0 * eps(dtype); }
// The float difference of a result summed from `terms` terms of magnitude <= 1.
double atol16(int64_t terms = 1) { return 1e-6 * static_cast<double>(terms); }

TensorOptions on(Device device, DType dtype) { return TensorOptions().dtype(dtype).device(device); }

// Runs `run(device)` on the CPU and on the GPU and compares the two results.
void expect_devices_agree(const std::function<Tensor(Device)>& run, double rtol, double atol, const std::string& what) {
  const Tensor expected = run(Device::cpu());
  const Tensor actual = run(gpu());
  ASSERT_TRUE(actual.device() == gpu()) << what << ": the result is on " << actual.device();
  ASSERT_EQ(expected.dtype(), actual.dtype()) << what;
  expect_close(expected, actual, rtol, atol, what);
}

// Like expect_devices_agree for a result that must be the same bits (picked, not computed).
void expect_devices_equal(const std::function<Tensor(Device)>& run, const std::string& what) {
  expect_devices_agree(run, 0.0, 0.0, what);
}

// Small whole numbers (-2 .. 2) of `dtype` on the CPU, so that equal pairs occur often.
Tensor small_integers(const Shape& shape, int64_t seed, DType dtype) {
  std::vector<double> values;
  for (int64_t i = 0; i < shape_numel(shape); ++i) values.push_back(static_cast<double>((i * 7 + seed) % 5 - 2));
  return from_vector(values, shape).to(dtype);
}

// Class labels 0 .. classes-1 for n rows, on the CPU.
Tensor labels(int64_t n, int64_t classes) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i) values.push_back((i * 7 + 3) % classes);
  return from_vector(values, {n});
}

// ---- GEMM --------------------------------------------------------------------------------

// One 16-bit product C (M, N, f32) = alpha A B + beta C on each device, with A and B handed
// over through `view` (which may transpose or stride them) and C starting from random values.
template <class T>
void check_gemm(int64_t M, int64_t K, int64_t N, float alpha, float beta,
                const std::function<std::pair<Tensor, Tensor>(const Tensor&, const Tensor&)>& view,
                const std::string& what) {
  const DType dtype = dtype_of<T>::value;
  const Tensor a = random_cpu({M, K}, 11, dtype), b = random_cpu({K, N}, 12, dtype);
  const Tensor c0 = random_cpu({M, N}, 13, DType::f32);
  expect_devices_agree(
      [&](Device device) {
        const auto [A, B] = view(a.to(device), b.to(device));
        const Tensor C = c0.to(device).clone();
        // The pointer-level GEMM of each backend (the ops reach them through batched_gemm).
        using Gemm = void (*)(int64_t, int64_t, int64_t, float, const T*, int64_t, int64_t, const T*, int64_t,
                              int64_t, float, float*, int64_t);
        const Gemm gemm = device.is_cuda() ? static_cast<Gemm>(cuda::gemm) : static_cast<Gemm>(cpu::gemm_16bit<T>);
        gemm(M, N, K, alpha, A.template data_ptr<T>(), A.stride(0), A.stride(1), B.template data_ptr<T>(),
             B.stride(0), B.stride(1), beta, C.template data_ptr<float>(), C.stride(0));
        return C;
      },
      rtol(DType::f32, K), atol(DType::f32, K), what + " " + dtype_name(dtype));
}

std::pair<Tensor, Tensor> as_is(const Tensor& a, const Tensor& b) { return {a, b}; }

// A and B as transposed views of contiguous (K, M) and (N, K) copies: cuBLAS reads them with
// CUBLAS_OP_T instead of copying.
std::pair<Tensor, Tensor> transposed(const Tensor& a, const Tensor& b) {
  return {a.t().contiguous().t(), b.t().contiguous().t()};
}

// A and B with no unit stride (every other column of wider matrices): packed before cuBLAS.
std::pair<Tensor, Tensor> strided(const Tensor& a, const Tensor& b) {
  auto spread = [](const Tensor& x) {
    const Tensor wide = zeros({x.size(0), 2 * x.size(1)}, x.options());
    const Tensor every_other = wide.slice(1, 0, 2 * x.size(1), 2);
    every_other.copy_(x);
    return every_other;
  };
  return {spread(a), spread(b)};
}

template <class T>
void check_gemm_layouts() {
  const std::pair<int64_t, int64_t> mk[] = {{1, 1}, {7, 13}, {129, 65}, {64, 64}, {3, 300}};
  for (const auto& [M, K] : mk) {
    const int64_t N = M == 64 ? 64 : M / 2 + 5;
    const std::string size = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    check_gemm<T>(M, K, N, 1.0f, 0.0f, as_is, "gemm " + size);
    check_gemm<T>(M, K, N, 0.5f, 2.0f, as_is, "gemm alpha 0.5 beta 2 " + size);
    check_gemm<T>(M, K, N, 1.0f, 0.0f, transposed, "gemm transposed " + size);
    check_gemm<T>(M, K, N, 1.0f, 1.0f, strided, "gemm strided " + size);
  }
  // alpha == 0 reads neither A nor B: C = beta C.
  check_gemm<T>(5, 4, 3, 0.0f, 3.0f, as_is, "gemm alpha 0");
}

// ---- Elementwise -------------------------------------------------------------------------

const BinaryOp kArithmetic[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::SigmoidBackward,
                                BinaryOp::TanhBackward};
const BinaryOp kComparisons[] = {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge};
const UnaryOp kUnary[] = {UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh};

// a op b into a fresh contiguous out of shape `shape` and dtype `out_dtype`, on each device,
// with the operands taken through `view` on the device.
void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape, DType out_dtype,
                  const std::function<std::pair<Tensor, Tensor>(const Tensor&, const Tensor&)>& view,
                  const std::string& what) {
  const DType dtype = a.dtype();
  auto run = [&](Device device) {
    const auto [x, y] = view(a.to(device), b.to(device));
    const Tensor out = empty(shape, on(device, out_dtype));
    kernels::binary.call(device, "binary", op, x, y, out);
    return out;
  };
  const std::string label = what + " op " + std::to_string(static_cast<int>(op)) + " " + dtype_name(dtype);
  // Comparisons of the same 16-bit values are exact.
  if (out_dtype == DType::boolean) {
    expect_devices_equal(run, label);
  } else {
    expect_devices_agree(run, rtol16(dtype), atol16(), label);
  }
}

// ---- Convolution -------------------------------------------------------------------------

Conv2dGeometry geometry(int64_t channels, int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  Conv2dGeometry g;
  g.channels = channels;
  g.height = g.width = size;
  g.kernel_h = g.kernel_w = kernel;
  g.stride = stride;
  g.padding = padding;
  g.out_h = g.out_w = (size + 2 * padding - kernel) / stride + 1;
  return g;
}

}  // namespace

TEST(Gpu16bit, GemmMatchesTheCpuGemm) {
  check_gemm_layouts<BFloat16>();
  check_gemm_layouts<Half>();
}

TEST(Gpu16bit, GemmUsesCublasWhateverTheBackend) {
  // The tiled kernel has no 16-bit version: with it selected, 16-bit products still run (on
  // cuBLAS) and give the same results.
  const cuda::GemmBackend saved = cuda::gemm_backend();
  cuda::set_gemm_backend(cuda::GemmBackend::Tiled);
  check_gemm<BFloat16>(33, 47, 21, 1.0f, 0.0f, as_is, "gemm with the tiled backend selected");
  check_gemm<Half>(33, 47, 21, 1.0f, 0.0f, as_is, "gemm with the tiled backend selected");
  cuda::set_gemm_backend(saved);
}

TEST(Gpu16bit, BinaryOpsDenseStridedAndBroadcast) {
  for (DType dtype : k16bit) {
    for (BinaryOp op : kArithmetic) {
      // 1001 = 8 * 125 + 1: whole 16-byte vectors of eight values and a one-element tail.
      for (const Shape& shape : {Shape{3, 1001}, Shape{8}, Shape{7}, Shape{1}}) {
        // b away from 0, for Div.
        const Tensor a = random_cpu(shape, 1, dtype), b = (random_cpu(shape, 2, DType::f64) + 2.0).to(dtype);
        check_binary(op, a, b, shape, dtype, as_is, "dense " + shape_str(shape));
      }
      const Tensor a = random_cpu({4, 1, 5}, 3, dtype), b = (random_cpu({3, 1}, 4, DType::f64) + 2.0).to(dtype);
      check_binary(op, a, b, {4, 3, 5}, dtype, as_is, "broadcast");
      const Tensor c = random_cpu({9, 6}, 5, dtype), d = (random_cpu({6, 9}, 6, DType::f64) + 2.0).to(dtype);
      check_binary(
          op, c, d, {6, 9}, dtype, [](const Tensor& x, const Tensor& y) { return std::make_pair(x.t(), y); },
          "transposed");
      // Contiguous, but one element past a 16-byte boundary: the strided path.
      const Tensor e = random_cpu({1030}, 7, dtype), f = (random_cpu({1030}, 8, DType::f64) + 2.0).to(dtype);
      check_binary(
          op, e, f, {1028}, dtype,
          [](const Tensor& x, const Tensor& y) { return std::make_pair(x.slice(0, 1, 1029), y.slice(0, 2, 1030)); },
          "misaligned");
    }
  }
}

TEST(Gpu16bit, BinaryOpsOnAMillionElements) {
  for (DType dtype : k16bit) {
    const int64_t n = (int64_t(1) << 20) + 3;
    const Tensor a = random_cpu({n}, 9, dtype), b = random_cpu({n}, 10, dtype);
    check_binary(BinaryOp::Mul, a, b, {n}, dtype, as_is, "2^20 + 3 elements");
  }
}

TEST(Gpu16bit, ComparisonsGiveBool) {
  for (DType dtype : k16bit) {
    // Few distinct values, so that equal pairs occur.
    const Tensor a = small_integers({5, 1001}, 0, dtype), b = small_integers({5, 1001}, 3, dtype);
    for (BinaryOp op : kComparisons) {
      check_binary(op, a, b, {5, 1001}, DType::boolean, as_is, "comparison dense");
      check_binary(
          op, a, b, {1001, 5}, DType::boolean,
          [](const Tensor& x, const Tensor& y) { return std::make_pair(x.t(), y.t()); }, "comparison transposed");
    }
  }
}

TEST(Gpu16bit, UnaryOps) {
  for (DType dtype : k16bit) {
    for (UnaryOp op : kUnary) {
      // log gets inputs in [0.5, 4.5), the others [-2, 2), where exp stays well inside f16's range.
      const double shift = op == UnaryOp::Log ? 2.5 : 0.0;
      const Tensor a = (random_cpu({3, 1001}, 13, DType::f64) * 2.0 + shift).to(dtype);
      const std::string what =
          std::string("unary op ") + std::to_string(static_cast<int>(op)) + " " + dtype_name(dtype);
      auto run = [&](Device device, bool transpose) {
        const Tensor x = transpose ? a.to(device).t() : a.to(device);
        const Tensor out = empty(x.shape(), on(device, dtype));
        kernels::unary.call(device, "unary", op, x, out);
        return out;
      };
      expect_devices_agree([&](Device device) { return run(device, false); }, rtol16(dtype), atol16(), what + " dense");
      expect_devices_agree([&](Device device) { return run(device, true); }, rtol16(dtype), atol16(),
                           what + " transposed");
    }
  }
}

TEST(Gpu16bit, AxpyAndScale) {
  for (DType dtype : k16bit) {
    const Tensor dst0 = random_cpu({7, 33}, 14, dtype), src = random_cpu({33}, 15, dtype);
    expect_devices_agree(
        [&](Device device) {
          const Tensor dst = dst0.to(device).clone();
          kernels::axpy.call(device, -0.75, src.to(device), dst);  // src broadcast over the rows
          return dst;
        },
        rtol16(dtype), atol16(), std::string("axpy ") + dtype_name(dtype));
    expect_devices_agree(
        [&](Device device) {
          const Tensor dst = dst0.to(device).clone();
          kernels::scale.call(device, 1.0 / 3.0, dst.t());
          return dst;
        },
        rtol16(dtype), atol16(), std::string("scale ") + dtype_name(dtype));
  }
}

TEST(Gpu16bit, Sum) {
  for (DType dtype : k16bit) {
    const std::string name = dtype_name(dtype);
    const Tensor a = random_cpu({6, 1000, 3}, 16, dtype);
    auto sum_over = [&](const Tensor& x, const std::vector<bool>& reduce, const Shape& kept) {
      return [&x, reduce, kept, dtype](Device device) {
        const Tensor out = empty(kept, on(device, dtype));
        kernels::sum.call(device, x.to(device), reduce, out);
        return out;
      };
    };
    // Sums in double, rounded once: the devices differ only where a sum's double values fall on
    // either side of a rounding boundary.
    expect_devices_agree(sum_over(a, {true, false, true}, {1000}), rtol16(dtype), atol16(), "sum over 0, 2 " + name);
    expect_devices_agree(sum_over(a, {false, true, false}, {6, 3}), rtol16(dtype), atol16(), "sum over 1 " + name);
    // One row long enough to be cut into chunks and summed in two passes.
    const Tensor big = random_cpu({1 << 18}, 17, dtype);
    expect_devices_agree(sum_over(big, {true}, {}), rtol16(dtype), atol16(), "sum of 2^18 " + name);
  }
}

TEST(Gpu16bit, MaxAndItsBackward) {
  for (DType dtype : k16bit) {
    // 16-bit values repeat often, so ties (first position wins) are common.
    const Tensor a = random_cpu({5, 300, 7}, 18, dtype), row = random_cpu({3, 40000}, 19, dtype);
    for (const auto& [x, dim] : {std::make_pair(a, int64_t{1}), std::make_pair(a, int64_t{2}),
                                 std::make_pair(row, int64_t{1})}) {
      Shape kept = x.shape();
      kept.erase(kept.begin() + dim);
      const std::string what = std::string("max over dim ") + std::to_string(dim) + " of " + shape_str(x.shape()) +
                               " " + dtype_name(dtype);
      auto run = [&, dim = dim, x = x](Device device, bool want_indices) {
        const Tensor values = empty(kept, on(device, dtype)), indices = empty(kept, on(device, DType::i64));
        kernels::max.call(device, x.to(device), dim, values, indices);
        return want_indices ? indices : values;
      };
      expect_devices_equal([&](Device device) { return run(device, false); }, what + " (values)");
      expect_devices_equal([&](Device device) { return run(device, true); }, what + " (indices)");

      const Tensor indices = empty(kept, on(Device::cpu(), DType::i64));
      kernels::max.call(Device::cpu(), x, dim, empty(kept, on(Device::cpu(), dtype)), indices);
      const Tensor grad = random_cpu(kept, 20, dtype);
      expect_devices_equal(
          [&, dim = dim, x = x](Device device) {
            const Tensor grad_input = empty(x.shape(), on(device, dtype));
            kernels::max_backward.call(device, grad.to(device), indices.to(device), dim, grad_input);
            return grad_input;
          },
          what + " (backward)");
    }
  }
}

TEST(Gpu16bit, SoftmaxAndLogSoftmaxForwardAndBackward) {
  // Lines of every grouping: a warp per row (37), a block per row (2000), one thread per
  // interleaved line (dim 1 of (4, 6, 5)), and a first dimension.
  const std::pair<Shape, int64_t> cases[] = {{{5, 37}, 1}, {{3, 2000}, 1}, {{4, 6, 5}, 1}, {{10, 4}, 0}};
  for (DType dtype : k16bit) {
    for (const auto& [shape, dim] : cases) {
      for (bool log : {false, true}) {
        const std::string what = std::string(log ? "log_softmax " : "softmax ") + shape_str(shape) + " dim " +
                                 std::to_string(dim) + " " + dtype_name(dtype);
        const Tensor x = (random_cpu(shape, 21, DType::f64) * 4.0).to(dtype);
        expect_devices_agree(
            [&, dim = dim, shape = shape](Device device) {
              const Tensor out = empty(shape, on(device, dtype));
              kernels::softmax.call(device, x.to(device), dim, log, out);
              return out;
            },
            rtol16(dtype), atol16(), what);
        // The backward from the CPU's output on both devices.
        const Tensor y = empty(shape, on(Device::cpu(), dtype));
        kernels::softmax.call(Device::cpu(), x, dim, log, y);
        const Tensor dy = random_cpu(shape, 22, dtype);
        expect_devices_agree(
            [&, dim = dim, shape = shape](Device device) {
              const Tensor dx = empty(shape, on(device, dtype));
              kernels::softmax_backward.call(device, dy.to(device), y.to(device), dim, log, dx);
              return dx;
            },
            rtol16(dtype), atol16(shape[dim]), what + " backward");
      }
    }
  }
}

TEST(Gpu16bit, CrossEntropyAndNllLoss) {
  for (DType dtype : k16bit) {
    // A warp per row (10 classes) and a block per row (1500).
    for (const auto& [rows, classes] :
         {std::make_pair(int64_t{17}, int64_t{10}), std::make_pair(int64_t{6}, int64_t{1500})}) {
      const std::string what = std::to_string(rows) + "x" + std::to_string(classes) + " " + dtype_name(dtype);
      const Tensor logits = (random_cpu({rows, classes}, 23, DType::f64) * 3.0).to(dtype);
      const Tensor target = labels(rows, classes);
      // Forward: the log-probabilities and the 0-d loss, both in the logits' dtype.
      for (bool want_loss : {false, true}) {
        expect_devices_agree(
            [&, rows = rows, classes = classes](Device device) {
              const Tensor log_probs = empty({rows, classes}, on(device, dtype)), loss = empty({}, on(device, dtype));
              kernels::cross_entropy.call(device, logits.to(device), target.to(device), log_probs, loss);
              return want_loss ? loss : log_probs;
            },
            rtol16(dtype), atol16(classes), "cross_entropy " + what + (want_loss ? " (loss)" : " (log_probs)"));
      }
      const Tensor log_probs = empty({rows, classes}, on(Device::cpu(), dtype));
      kernels::cross_entropy.call(Device::cpu(), logits, target, log_probs, empty({}, on(Device::cpu(), dtype)));
      const Tensor grad = full({}, 1.5, on(Device::cpu(), dtype));
      expect_devices_agree(
          [&, rows = rows, classes = classes](Device device) {
            const Tensor grad_logits = empty({rows, classes}, on(device, dtype));
            kernels::cross_entropy_backward.call(device, grad.to(device), log_probs.to(device), target.to(device),
                                                 grad_logits);
            return grad_logits;
          },
          rtol16(dtype), atol16(), "cross_entropy backward " + what);
      expect_devices_agree(
          [&](Device device) {
            const Tensor loss = empty({}, on(device, dtype));
            // Read through a transposed view's transpose: nll_loss reads its entries in place.
            kernels::nll_loss.call(device, log_probs.to(device).t().contiguous().t(), target.to(device), loss);
            return loss;
          },
          rtol16(dtype), atol16(rows), "nll_loss " + what);
      expect_devices_agree(
          [&, rows = rows, classes = classes](Device device) {
            const Tensor grad_log_probs = empty({rows, classes}, on(device, dtype));
            kernels::nll_loss_backward.call(device, grad.to(device), target.to(device), grad_log_probs);
            return grad_log_probs;
          },
          0.0, 0.0, "nll_loss backward " + what);
    }
  }
}

TEST(Gpu16bit, MaxPool2dForwardAndBackward) {
  struct Pool {
    int64_t kernel, stride, padding;
  };
  // Disjoint windows, and overlapping ones whose input gradients collect several shares.
  for (DType dtype : k16bit) {
    for (Pool p : {Pool{2, 2, 0}, Pool{3, 1, 1}, Pool{3, 2, 1}}) {
      const int64_t N = 2, C = 3, H = 11, W = 11;
      const int64_t OH = (H + 2 * p.padding - p.kernel) / p.stride + 1;
      const int64_t OW = (W + 2 * p.padding - p.kernel) / p.stride + 1;
      const std::string what = "max_pool2d k" + std::to_string(p.kernel) + " s" + std::to_string(p.stride) + " p" +
                               std::to_string(p.padding) + " " + dtype_name(dtype);
      const Tensor x = random_cpu({N, C, H, W}, 24, dtype);
      for (bool want_indices : {false, true}) {
        expect_devices_equal(
            [&](Device device) {
              const Tensor out = empty({N, C, OH, OW}, on(device, dtype));
              const Tensor indices = empty({N, C, OH, OW}, on(device, DType::i64));
              kernels::max_pool2d.call(device, x.to(device), p.kernel, p.stride, p.padding, out, indices);
              return want_indices ? indices : out;
            },
            what + (want_indices ? " (indices)" : " (values)"));
      }
      const Tensor indices = empty({N, C, OH, OW}, on(Device::cpu(), DType::i64));
      kernels::max_pool2d.call(Device::cpu(), x, p.kernel, p.stride, p.padding,
                               empty({N, C, OH, OW}, on(Device::cpu(), dtype)), indices);
      const Tensor grad = random_cpu({N, C, OH, OW}, 25, dtype);
      // Both devices add an input's shares in float, in row-major window order: the same bits.
      expect_devices_equal(
          [&](Device device) {
            const Tensor grad_input = empty({N, C, H, W}, on(device, dtype));
            kernels::max_pool2d_backward.call(device, grad.to(device), indices.to(device), p.kernel, p.stride,
                                              p.padding, grad_input);
            return grad_input;
          },
          what + " backward");
    }
  }
}

TEST(Gpu16bit, BatchNormWithF32Statistics) {
  for (DType dtype : k16bit) {
    for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{16, 5}}) {
      const int64_t C = shape[1], count = shape_numel(shape) / C;
      const std::string what = "batch_norm " + shape_str(shape) + " " + dtype_name(dtype);
      const Tensor x = (random_cpu(shape, 26, DType::f64) * 2.0 + 0.5).to(dtype);
      const Tensor dy = random_cpu(shape, 27, dtype);
      const Tensor weight = random_cpu({C}, 28) + 1.5, bias = random_cpu({C}, 29);  // f32

      // The statistics: f32, from sums in double, so the devices agree to f32 rounding.
      for (int which : {0, 1}) {
        expect_devices_agree(
            [&](Device device) {
              const auto stats = kernels::batch_norm_stats.call(device, x.to(device), 1e-5);
              EXPECT_EQ(stats.first.dtype(), DType::f32) << what;
              return which == 0 ? stats.first : stats.second;
            },
            1e-5, 1e-6, what + (which == 0 ? " (mean)" : " (invstd)"));
      }
      const std::pair<Tensor, Tensor> stats = kernels::batch_norm_stats.call(Device::cpu(), x, 1e-5);
      const Tensor &mean = stats.first, &invstd = stats.second;
      expect_devices_agree(
          [&](Device device) {
            const Tensor out = empty(shape, on(device, dtype));
            kernels::batch_norm_elemt.call(device, x.to(device), mean.to(device), invstd.to(device), weight.to(device),
                                           bias.to(device), out);
            return out;
          },
          rtol16(dtype), atol16(8), what + " (elemt)");
      for (int which : {0, 1}) {
        expect_devices_agree(
            [&](Device device) {
              const auto sums = kernels::batch_norm_backward_reduce.call(device, dy.to(device), x.to(device),
                                                                         mean.to(device));
              EXPECT_EQ(sums.first.dtype(), DType::f32) << what;
              return which == 0 ? sums.first : sums.second;
            },
            1e-5, 1e-5, what + (which == 0 ? " (sum_dy)" : " (sum_dy_xmu)"));
      }
      const std::pair<Tensor, Tensor> sums = kernels::batch_norm_backward_reduce.call(Device::cpu(), dy, x, mean);
      const Tensor &sum_dy = sums.first, &sum_dy_xmu = sums.second;
      expect_devices_agree(
          [&](Device device) {
            const Tensor grad_input = empty(shape, on(device, dtype));
            kernels::batch_norm_backward_elemt.call(device, dy.to(device), x.to(device), mean.to(device),
                                                    invstd.to(device), weight.to(device), sum_dy.to(device),
                                                    sum_dy_xmu.to(device), count, grad_input);
            return grad_input;
          },
          rtol16(dtype), atol16(8), what + " (backward elemt)");
    }
  }
}

TEST(Gpu16bit, Conv2dForwardAndBackward) {
  struct Case {
    int64_t batch, in_channels, size, out_channels, kernel, stride, padding;
  };
  for (DType dtype : k16bit) {
    for (Case c : {Case{3, 4, 9, 5, 3, 1, 1}, Case{2, 3, 10, 6, 3, 2, 0}, Case{4, 2, 6, 3, 1, 1, 0}}) {
      const Conv2dGeometry g = geometry(c.in_channels, c.size, c.kernel, c.stride, c.padding);
      const std::string what = "conv2d " + std::to_string(c.kernel) + "x" + std::to_string(c.kernel) + " stride " +
                               std::to_string(c.stride) + " pad " + std::to_string(c.padding) + " " + dtype_name(dtype);
      const Tensor x = random_cpu({c.batch, c.in_channels, c.size, c.size}, 30, dtype);
      const Tensor w = random_cpu({c.out_channels, c.in_channels, c.kernel, c.kernel}, 31, dtype);
      const Tensor b = random_cpu({c.out_channels}, 32, dtype);
      const Shape out_shape{c.batch, c.out_channels, g.out_h, g.out_w};
      for (bool with_bias : {true, false}) {
        expect_devices_agree(
            [&](Device device) {
              const Tensor out = empty(out_shape, on(device, dtype));
              kernels::conv2d_forward.call(device, x.to(device), w.to(device), with_bias ? b.to(device) : Tensor(),
                                           out, g);
              return out;
            },
            rtol16(dtype), atol16(g.patch_size() + 1), what + (with_bias ? " forward" : " forward without bias"));
      }
      const Tensor dy = random_cpu(out_shape, 33, dtype);
      for (bool want_input : {true, false}) {
        // dx sums C_out * kH * kW terms per pixel, dW batch * pixels terms per weight.
        const int64_t terms = want_input ? c.out_channels * c.kernel * c.kernel : c.batch * g.out_pixels();
        expect_devices_agree(
            [&](Device device) {
              const Tensor dx = empty(x.shape(), on(device, dtype)), dw = empty(w.shape(), on(device, dtype));
              kernels::conv2d_backward.call(device, dy.to(device), x.to(device), w.to(device),
                                            want_input ? dx : Tensor(), want_input ? Tensor() : dw, g);
              return want_input ? dx : dw;
            },
            rtol16(dtype), atol16(terms), what + (want_input ? " grad_input" : " grad_weight"));
      }
    }
  }
}

TEST(Gpu16bit, DropoutMaskIn16BitsDropsWhatF32Drops) {
  // The GPU's mask depends only on (seed, element index), not on the dtype: one seed drops the
  // same elements in f32, f16 and bf16, and the survivors hold scale rounded to the dtype.
  const int64_t n = 100003;
  const double p = 0.3, scale = 1.0 / (1.0 - p);
  const Tensor reference = empty({n}, on(gpu(), DType::f32));
  Generator g32(5);
  kernels::dropout_mask.call(gpu(), reference, p, scale, &g32);
  const std::vector<double> kept32 = reference.to(Device::cpu()).to_vector<double>();
  for (DType dtype : k16bit) {
    const Tensor mask = empty({n}, on(gpu(), dtype));
    Generator g16(5);
    kernels::dropout_mask.call(gpu(), mask, p, scale, &g16);
    const std::vector<double> kept = mask.to(Device::cpu()).to_vector<double>();
    const double rounded_scale = full({}, scale, on(Device::cpu(), dtype)).item();
    for (int64_t i = 0; i < n; ++i) {
      const double expected = kept32[i] == 0.0 ? 0.0 : rounded_scale;
      if (kept[i] != expected) {
        ADD_FAILURE() << "dropout mask " << dtype_name(dtype) << ": element " << i << " is " << kept[i]
                      << ", expected " << expected;
        break;
      }
    }
  }
}
