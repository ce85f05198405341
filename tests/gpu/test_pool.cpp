// max_pool2d on the GPU against the CPU, forward and backward: kernel 2 and 3, stride 1 and 2,
// padding 0 and 1 (overlapping windows included), odd sizes, ties (the first maximum wins),
// non-contiguous inputs and gradients, NaN, and an empty batch.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// No tolerance. The forward pass only compares and copies. Backward, an input that wins
// several overlapping windows (at most 9 here) adds their gradients in row-major window order
// on both devices, so the sums have the same bits.

const DType kDTypes[] = {DType::f32, DType::f64};

struct Window {
  int64_t kernel_size, stride, padding;
};
// Every combination of kernel 2/3, stride 1/2, padding 0/1; stride < kernel overlaps.
const Window kWindows[] = {{2, 1, 0}, {2, 1, 1}, {2, 2, 0}, {2, 2, 1}, {3, 1, 0}, {3, 1, 1}, {3, 2, 0}, {3, 2, 1}};

std::string label(const char* what, Window w, DType dtype) {
  return std::string(what) + " k=" + std::to_string(w.kernel_size) + " s=" + std::to_string(w.stride) +
         " p=" + std::to_string(w.padding) + " " + dtype_name(dtype);
}

// Checks max_pool2d of x (CPU, requires grad) with window w on the GPU.
void check(const Tensor& x, Window w, const std::string& what) {
  expect_parity([w](const std::vector<Tensor>& in) { return max_pool2d(in[0], w.kernel_size, w.stride, w.padding); },
                {x}, 0.0, 0.0, what);
}

}  // namespace

TEST(GpuPool, EveryWindowOnOddSizes) {
  for (DType dtype : kDTypes) {
    for (Window w : kWindows) {
      check(random_cpu({2, 3, 7, 9}, 61, dtype).requires_grad_(true), w, label("random 7x9", w, dtype));
      check(random_cpu({3, 2, 5, 4}, 67, dtype).requires_grad_(true), w, label("random 5x4", w, dtype));
    }
  }
}

TEST(GpuPool, TiesGoToTheFirstMaximum) {
  // A constant input ties every window; values from {-2, -1, 0, 1} tie many of them.
  for (DType dtype : kDTypes) {
    std::vector<double> values = random_cpu({2, 2, 7, 7}, 71, DType::f64).to_vector<double>();
    for (double& v : values) v = std::floor(v * 1.5);
    const TensorOptions options = TensorOptions().dtype(dtype);
    for (Window w : kWindows) {
      check(full({2, 2, 7, 7}, 0.5, options).requires_grad_(true), w, label("constant", w, dtype));
      check(from_vector(values, {2, 2, 7, 7}, options).requires_grad_(true), w, label("four values", w, dtype));
    }
  }
}

TEST(GpuPool, NonContiguousInputAndGradient) {
  for (DType dtype : kDTypes) {
    // The input stored as (N, H, W, C) and pooled as (N, C, H, W), and the output transposed
    // before use, so that the gradient arriving at max_pool2d is not contiguous either.
    const Tensor stored = random_cpu({2, 9, 8, 3}, 73, dtype).requires_grad_(true);
    for (Window w : kWindows) {
      expect_parity(
          [w](const std::vector<Tensor>& in) {
            return max_pool2d(in[0].permute({0, 3, 1, 2}), w.kernel_size, w.stride, w.padding).transpose(2, 3);
          },
          {stored}, 0.0, 0.0, label("channels-last input", w, dtype));
    }
  }
}

TEST(GpuPool, NanWinsItsWindows) {
  for (DType dtype : kDTypes) {
    std::vector<double> values = random_cpu({1, 1, 5, 5}, 79, DType::f64).to_vector<double>();
    values[2 * 5 + 3] = NAN;
    const Tensor x = from_vector(values, {1, 1, 5, 5}, TensorOptions().dtype(dtype));
    expect_close(max_pool2d(x, 3, 1, 1), max_pool2d(x.to(gpu()), 3, 1, 1), 0.0, 0.0, "max_pool2d with a NaN");
  }
}

TEST(GpuPool, EmptyBatch) {
  for (DType dtype : kDTypes) {
    check(random_cpu({0, 3, 6, 6}, 83, dtype).requires_grad_(true), {2, 2, 0}, label("empty batch", {2, 2, 0}, dtype));
  }
}

TEST(GpuPool, LargeInput) {
  // A typical CNN layer's size: hundreds of thousands of outputs, thousands of blocks.
  for (DType dtype : kDTypes) {
    for (Window w : {Window{2, 2, 0}, Window{3, 2, 1}}) {
      check(random_cpu({64, 32, 28, 28}, 89, dtype).requires_grad_(true), w, label("64x32x28x28", w, dtype));
    }
  }
}
