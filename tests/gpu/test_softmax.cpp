// softmax and log_softmax on the GPU against the CPU, forward and backward: every dim of a 3-D
// tensor, line lengths that pick each CUDA thread grouping (a thread, a warp, a block per
// line), non-contiguous inputs, large logits, lines of one element, 0-d and empty tensors, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Tolerances. f32: the CPU and the GPU evaluate e^x with different libraries (a few ulp apart)
// and the GPU contracts a * b + c into one rounding, so results differ in the last bits; the
// sums are accumulated in double on both. f64: the same differences at double precision.
double rtol(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }
double atol(DType dtype) { return dtype == DType::f32 ? 1e-6 : 1e-14; }

struct Op {
  const char* name;
  Tensor (*fn)(const Tensor&, int64_t);
};
const Op kOps[] = {{"softmax", softmax}, {"log_softmax", log_softmax}};

// Checks op along `dim` of a random input of `shape` (values in [-scale, scale)) on the GPU.
void check(const Op& op, const Shape& shape, int64_t dim, DType dtype, double scale = 1.0) {
  const Tensor x = (random_cpu(shape, 17, dtype) * scale).detach().requires_grad_(true);
  expect_parity([&](const std::vector<Tensor>& in) { return op.fn(in[0], dim); }, {x}, rtol(dtype), atol(dtype),
                std::string(op.name) + " " + shape_str(shape) + " dim " + std::to_string(dim) + " " +
                    dtype_name(dtype));
}

const DType kDTypes[] = {DType::f32, DType::f64};

}  // namespace

TEST(GpuSoftmax, EveryDimOfA3DTensor) {
  for (const Op& op : kOps) {
    for (DType dtype : kDTypes) {
      for (int64_t dim : {0, 1, 2, -1}) check(op, {3, 5, 7}, dim, dtype);
    }
  }
}

TEST(GpuSoftmax, LineLengthsForEachThreadGrouping) {
  // Along the last dim: 5 elements (a thread per line), 100 (a warp), 3000 (a block, with a
  // tail the block's 256 threads do not divide). Along dim 0 the lines are interleaved in
  // memory (a thread per line) whatever their length.
  for (const Op& op : kOps) {
    for (DType dtype : kDTypes) {
      check(op, {37, 5}, 1, dtype);
      check(op, {37, 100}, 1, dtype);
      check(op, {5, 3000}, 1, dtype);
      check(op, {3000, 5}, 0, dtype);
    }
  }
}

TEST(GpuSoftmax, MoreLinesThanTheGridHasBlocks) {
  // The grid is capped at 65536 blocks; with a block per line, 70000 lines make some blocks
  // take a second line. Forward only, f32: the point is the loop over lines, and the input
  // is large.
  const Tensor x = random_cpu({70000, 1024}, 29);
  for (const Op& op : kOps) {
    expect_close(op.fn(x, 1), op.fn(x.to(gpu()), 1), rtol(DType::f32), atol(DType::f32),
                 std::string(op.name) + " of 70000 lines");
  }
}

TEST(GpuSoftmax, NonContiguousInput) {
  for (const Op& op : kOps) {
    for (DType dtype : kDTypes) {
      const Tensor x = random_cpu({4, 6, 50}, 23, dtype).requires_grad_(true);
      // A transposed view and a strided slice: each line must be read logically, not in memory
      // order.
      expect_parity([&](const std::vector<Tensor>& in) { return op.fn(in[0].transpose(0, 2), 1); }, {x},
                    rtol(dtype), atol(dtype), std::string(op.name) + " of a transpose");
      expect_parity([&](const std::vector<Tensor>& in) { return op.fn(in[0].slice(2, 1, 50, 3), -1); }, {x},
                    rtol(dtype), atol(dtype), std::string(op.name) + " of a strided slice");
    }
  }
}

TEST(GpuSoftmax, LargeLogitsStayFinite) {
  // Logits up to 1000 overflow e^x without the max subtracted.
  for (const Op& op : kOps) {
    for (DType dtype : kDTypes) {
      check(op, {6, 40}, 1, dtype, 1000.0);
      check(op, {6, 2000}, 1, dtype, 1000.0);
      const Tensor y = op.fn((random_cpu({6, 40}, 5, dtype) * 1000.0).to(gpu()), 1);
      for (double v : y.to(Device::cpu()).to_vector<double>()) EXPECT_TRUE(std::isfinite(v)) << op.name;
    }
  }
}

TEST(GpuSoftmax, LinesOfOneElementZeroDAndEmpty) {
  for (const Op& op : kOps) {
    for (DType dtype : kDTypes) {
      check(op, {4, 1}, 1, dtype);   // softmax 1, log_softmax 0
      check(op, {}, 0, dtype);       // a 0-d tensor is one line of one element
      check(op, {0, 5}, 1, dtype);   // no lines
      check(op, {3, 0, 2}, 1, dtype);  // lines of no elements
    }
  }
}

TEST(GpuSoftmax, NanMakesItsLineNan) {
  for (const Op& op : kOps) {
    std::vector<double> values = random_cpu({3, 4}, 3, DType::f64).to_vector<double>();
    values[1 * 4 + 2] = NAN;
    const Tensor x = from_vector(values, {3, 4});
    const std::vector<double> y = op.fn(x.to(gpu()), 1).to(Device::cpu()).to_vector<double>();
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_FALSE(std::isnan(y[0 * 4 + j])) << op.name;
      EXPECT_TRUE(std::isnan(y[1 * 4 + j])) << op.name;
      EXPECT_FALSE(std::isnan(y[2 * 4 + j])) << op.name;
    }
  }
}
