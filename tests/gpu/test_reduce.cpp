// sum and mean on the GPU against the CPU, forward and backward: every set of dimensions of a
// 3-D tensor with and without keepdim, non-contiguous inputs, integer and bool sums (exact,
// i64), sizes 0 and 1, and shapes that exercise each way the CUDA kernel splits its work:
// many short rows (a warp per row), long rows (a block per row), very long rows (cut into
// chunks and summed in two passes), and a sum of every element of a large tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Tolerances. Both devices accumulate floats in double, in different orders: the double sums
// differ by about (terms) * 1e-16 of the terms' size, and an f32 result can then round to the
// neighbouring float. f64 keeps that difference, so atol grows with the number of terms.
double rtol(DType dtype) { return dtype == DType::f32 ? 1e-6 : 1e-12; }
double atol(DType dtype, int64_t terms = 100) {
  return dtype == DType::f32 ? 1e-6 : 1e-15 * static_cast<double>(terms);
}

const DType kFloating[] = {DType::f32, DType::f64};

std::string dims_str(const Shape& dims) { return dims.empty() ? std::string("all") : shape_str(dims); }

}  // namespace

TEST(GpuReduce, SumAndMeanOverEveryDimSet) {
  const std::vector<Shape> dim_sets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {0, 1}, {1, 2}, {0, 1, 2}};
  for (DType dtype : kFloating) {
    const Tensor x = random_cpu({3, 4, 5}, 1, dtype).requires_grad_(true);
    for (const Shape& dims : dim_sets) {
      for (bool keepdim : {false, true}) {
        const std::string what = dims_str(dims) + (keepdim ? " keepdim " : " ") + dtype_name(dtype);
        expect_parity([&](const std::vector<Tensor>& in) { return sum(in[0], dims, keepdim); }, {x}, rtol(dtype),
                      atol(dtype), "sum over " + what);
        expect_parity([&](const std::vector<Tensor>& in) { return mean(in[0], dims, keepdim); }, {x}, rtol(dtype),
                      atol(dtype), "mean over " + what);
      }
    }
    expect_parity([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}, rtol(dtype), atol(dtype),
                  std::string("sum() ") + dtype_name(dtype));
  }
}

TEST(GpuReduce, NonContiguousInputs) {
  for (DType dtype : kFloating) {
    const Tensor x = random_cpu({6, 10, 4}, 2, dtype).requires_grad_(true);
    for (const Shape& dims : {Shape{}, Shape{0}, Shape{1}, Shape{2}, Shape{0, 2}}) {
      expect_parity([&](const std::vector<Tensor>& in) { return sum(in[0].transpose(0, 2), dims); }, {x}, rtol(dtype),
                    atol(dtype), "sum of a transposed view over " + dims_str(dims) + " " + dtype_name(dtype));
      expect_parity([&](const std::vector<Tensor>& in) { return sum(in[0].slice(1, 1, 10, 3), dims, true); }, {x},
                    rtol(dtype), atol(dtype), "sum of a strided slice over " + dims_str(dims) + " " + dtype_name(dtype));
      expect_parity([&](const std::vector<Tensor>& in) { return sum(in[0].select(2, 1).expand({3, 6, 10}), dims); },
                    {x}, rtol(dtype), atol(dtype), "sum of an expanded view over " + dims_str(dims) + " " + dtype_name(dtype));
    }
  }
}

TEST(GpuReduce, EachWayOfSplittingTheWork) {
  // (rows, row length) after moving the summed dimensions last: 20000 rows of 7 (a warp per
  // row), 40 rows of 3000 (a block per row), 3 rows of 300001 (chunks, two passes), and
  // 300001 rows of 3 summed over dim 0 (the kernel's copy into row order).
  struct Case {
    Shape shape;
    Shape dims;
  };
  const Case cases[] = {{{20000, 7}, {1}}, {{40, 3000}, {1}}, {{3, 300001}, {1}}, {{300001, 3}, {0}}};
  for (DType dtype : kFloating) {
    for (const Case& c : cases) {
      const Tensor x = random_cpu(c.shape, 3, dtype).requires_grad_(true);
      expect_parity([&](const std::vector<Tensor>& in) { return sum(in[0], c.dims); }, {x}, rtol(dtype),
                    atol(dtype, x.numel()), "sum of " + shape_str(c.shape) + " over " + dims_str(c.dims) + " " +
                                                dtype_name(dtype));
    }
  }
}

TEST(GpuReduce, EveryElementOfALargeTensor) {
  // 2^22 + 5 elements in one row: many chunks, then one row of partial sums. Shifting by 0.5
  // keeps the sum far from 0, so rtol is what is tested.
  for (DType dtype : kFloating) {
    const Tensor x = random_cpu({(1 << 22) + 5}, 4, dtype) + 0.5;
    expect_close(sum(x), sum(x.to(gpu())), rtol(dtype), atol(dtype, x.numel()),
                 std::string("sum of 2^22 + 5 elements ") + dtype_name(dtype));
    // 2^22 + 5 = 3 * 1398103: three long rows, each cut into chunks.
    expect_close(mean(x.view({3, -1}), {1}), mean(x.view({3, -1}).to(gpu()), {1}), rtol(dtype), atol(dtype),
                 std::string("mean of 3 rows of 1398103 ") + dtype_name(dtype));
  }
}

TEST(GpuReduce, IntegerAndBoolSumsAreExactI64) {
  const Tensor values = (random_cpu({37, 1001}, 5, DType::f64) * 100.0).to(DType::i64);
  const Tensor small = ((random_cpu({37, 1001}, 6, DType::f64) + 1.0) * 127.0).to(DType::u8);
  const std::vector<Tensor> inputs = {values, values.to(DType::i32), small,
                                      gt(values, zeros({1}, TensorOptions().dtype(DType::i64)))};
  for (const Tensor& x : inputs) {
    for (const Shape& dims : {Shape{}, Shape{0}, Shape{1}}) {
      const Tensor on_gpu = sum(x.to(gpu()), dims);
      EXPECT_EQ(on_gpu.dtype(), DType::i64) << dtype_name(x.dtype());
      expect_close(sum(x, dims), on_gpu, 0, 0, "sum of " + dtype_name(x.dtype()) + " over " + dims_str(dims));
    }
  }
  // Counting the true values of a comparison over 2^21 elements, as an accuracy metric does.
  const Tensor big = random_cpu({1 << 21}, 7);
  const Tensor zero = zeros({1});
  EXPECT_EQ(sum(gt(big.to(gpu()), zero.to(gpu()))).item<int64_t>(), sum(gt(big, zero)).item<int64_t>());
}

TEST(GpuReduce, SizesZeroAndOne) {
  const TensorOptions on_gpu = TensorOptions().device(gpu());
  // Summing nothing gives 0; an empty kept dimension gives an empty result.
  expect_close(zeros({}), sum(zeros({0, 3}, on_gpu)), 0, 0, "sum of an empty tensor");
  expect_close(zeros({3}), sum(zeros({0, 3}, on_gpu), {0}), 0, 0, "sum over an empty dimension");
  EXPECT_EQ(sum(zeros({0, 3}, on_gpu), {1}).shape(), (Shape{0}));
  EXPECT_EQ(sum(zeros({0}, TensorOptions().dtype(DType::i64).device(gpu()))).item<int64_t>(), 0);
  for (DType dtype : kFloating) {
    const Tensor one = random_cpu({1}, 7, dtype).requires_grad_(true);
    const Tensor scalar = random_cpu({}, 8, dtype).requires_grad_(true);
    const Tensor column = random_cpu({5, 1}, 9, dtype).requires_grad_(true);
    expect_parity([](const std::vector<Tensor>& in) { return sum(in[0]); }, {one}, 0, 0, "sum of one element");
    expect_parity([](const std::vector<Tensor>& in) { return sum(in[0], {0}); }, {scalar}, 0, 0, "sum of a 0-d tensor");
    expect_parity([](const std::vector<Tensor>& in) { return sum(in[0], {1}, true); }, {column}, 0, 0,
                  "sum over a dimension of size 1");
  }
}
