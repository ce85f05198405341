// max(a), max(a, dim) and argmax on the GPU against the CPU: values, indices and gradients for
// every dim with and without keepdim, ties (the first position wins, also when the tied
// elements fall in different chunks of a long row; max(a)'s gradient is shared by them), NaN (larger than everything), every
// numeric dtype, non-contiguous inputs, 0-d tensors and empty outer dimensions, and shapes that
// exercise each CUDA decomposition: a thread per column, a warp or a block per row, and rows
// long enough to be cut into chunks and finished in a second pass.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

// Tolerance: none. A max copies an element and its position, and the gradient copies the
// incoming gradient, so both devices must agree exactly.

namespace {

const DType kFloating[] = {DType::f32, DType::f64};

// max(x, dim, keepdim) on both devices: values and gradient through expect_parity, indices
// compared directly.
void check_dim(const Tensor& x, int64_t dim, bool keepdim, const std::string& what) {
  const Tensor leaf = x.detach().requires_grad_(true);
  expect_parity([&](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim).first; }, {leaf}, 0, 0,
                "max values " + what);
  expect_close(max(x, dim, keepdim).second, max(x.to(gpu()), dim, keepdim).second, 0, 0, "max indices " + what);
  expect_close(argmax(x, dim, keepdim), argmax(x.to(gpu()), dim, keepdim), 0, 0, "argmax " + what);
}

}  // namespace

TEST(GpuMax, EveryDimOfA3DTensor) {
  for (DType dtype : kFloating) {
    const Tensor x = random_cpu({3, 5, 7}, 1, dtype);
    for (int64_t dim : {0, 1, 2, -1}) {
      for (bool keepdim : {false, true}) {
        check_dim(x, dim, keepdim, "dim " + std::to_string(dim) + (keepdim ? " keepdim " : " ") + dtype_name(dtype));
      }
    }
    const Tensor leaf = x.detach().requires_grad_(true);
    expect_parity([](const std::vector<Tensor>& in) { return max(in[0]); }, {leaf}, 0, 0,
                  std::string("max() ") + dtype_name(dtype));
  }
}

TEST(GpuMax, EachDecomposition) {
  // (shape, dim): columns walked by one thread each (inner > 1); 5000 short rows (a warp per
  // row); 50 rows of 3000 (a block per row); 2 rows of 200003 (chunks and a second pass);
  // the overall max of 2^21 + 1 elements.
  struct Case {
    Shape shape;
    int64_t dim;
  };
  const Case cases[] = {{{70, 300, 9}, 1}, {{100000, 3}, 0}, {{5000, 7}, 1}, {{50, 3000}, 1}, {{2, 200003}, 1}};
  for (DType dtype : kFloating) {
    for (const Case& c : cases) {
      check_dim(random_cpu(c.shape, 2, dtype), c.dim, false, shape_str(c.shape) + " dim " + std::to_string(c.dim));
    }
    const Tensor big = random_cpu({(1 << 21) + 1}, 3, dtype);
    expect_close(max(big), max(big.to(gpu())), 0, 0, std::string("max of 2^21 + 1 elements ") + dtype_name(dtype));
  }
}

TEST(GpuMax, TiesGoToTheFirstPosition) {
  // Small rows and columns full of ties.
  const Tensor t = from_vector({1, 3, 3, 2, 5, 5, 5, 0, 4, 4, 1, 4}, {3, 4});
  for (int64_t dim : {0, 1}) check_dim(t, dim, false, "ties along dim " + std::to_string(dim));
  // A long row of equal values: every chunk reports its first element, and the second pass
  // must still pick chunk 0's.
  const Tensor flat = ones({1, 3000001});
  EXPECT_EQ(argmax(flat.to(gpu()), 1).item<int64_t>(), 0);
  // The maximum twice, far apart (different chunks, different blocks): the first one wins.
  std::vector<double> values(3000001, 0.0);
  values[1234567] = 2.0;
  values[2345678] = 2.0;
  const Tensor two = from_vector(values, {3000001});
  EXPECT_EQ(argmax(two.to(gpu()), 0).item<int64_t>(), 1234567);
  // max() without a dim selects no one element: its gradient is shared evenly by the tied
  // maxima, as in PyTorch (and as on the CPU, tests/unit/test_max.cpp).
  const Tensor leaf = two.to(gpu()).detach().requires_grad_(true);
  max(leaf).backward();
  const std::vector<float> grad = leaf.grad().to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(grad[1234567], 0.5f);
  EXPECT_EQ(grad[2345678], 0.5f);
  EXPECT_EQ(sum(leaf.grad()).item<float>(), 1.0f);
}

TEST(GpuMax, NaNIsLargerThanEverything) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : kFloating) {
    const Tensor x = from_vector({1, nan, 7, nan, 2, 9, 3, 4, 0, 5, 6, nan}, {3, 4}, TensorOptions().dtype(dtype));
    for (int64_t dim : {0, 1}) check_dim(x, dim, false, "NaN along dim " + std::to_string(dim) + " " + dtype_name(dtype));
    // One NaN in a row long enough to be split into chunks.
    std::vector<double> values(500000, 1.0);
    values[444444] = nan;
    const Tensor long_row = from_vector(values, {500000}, TensorOptions().dtype(dtype));
    const Tensor gpu_max = max(long_row.to(gpu()));
    EXPECT_TRUE(std::isnan(gpu_max.item())) << dtype_name(dtype);
    EXPECT_EQ(argmax(long_row.to(gpu()), 0).item<int64_t>(), 444444) << dtype_name(dtype);
  }
}

TEST(GpuMax, EveryNumericDType) {
  // Small integers: plenty of ties. Values and indices must match exactly.
  const Tensor base = (random_cpu({40, 33}, 4, DType::f64) * 5.0 + 5.0).to(DType::i64);
  for (DType dtype : {DType::i64, DType::i32, DType::u8, DType::boolean}) {
    const Tensor x = base.to(dtype);
    for (int64_t dim : {0, 1}) {
      const auto [values, indices] = max(x.to(gpu()), dim);
      EXPECT_EQ(values.dtype(), dtype);
      expect_close(max(x, dim).first, values, 0, 0, "max values " + dtype_name(dtype));
      expect_close(max(x, dim).second, indices, 0, 0, "max indices " + dtype_name(dtype));
    }
    expect_close(max(x), max(x.to(gpu())), 0, 0, "max() " + dtype_name(dtype));
  }
}

TEST(GpuMax, NonContiguousInputs) {
  for (DType dtype : kFloating) {
    const Tensor x = random_cpu({6, 9, 5}, 5, dtype);
    for (int64_t dim : {0, 1, 2}) {
      check_dim(x.transpose(0, 2), dim, false, "transposed, dim " + std::to_string(dim));
      check_dim(x.slice(1, 1, 9, 2), dim, true, "strided slice, dim " + std::to_string(dim));
    }
  }
}

TEST(GpuMax, ZeroDAndEmptyOuterDimensions) {
  const Tensor scalar = random_cpu({}, 6);
  check_dim(scalar, 0, false, "0-d");
  expect_close(max(scalar), max(scalar.to(gpu())), 0, 0, "max() of 0-d");
  // Nothing to reduce into: an empty result, no launch.
  const auto [values, indices] = max(zeros({0, 5}).to(gpu()), 1);
  EXPECT_EQ(values.shape(), (Shape{0}));
  EXPECT_EQ(indices.shape(), (Shape{0}));
}
