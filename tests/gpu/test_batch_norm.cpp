// batch_norm on a GPU against the CPU: training (batch statistics, forward and the gradients
// of input, weight and bias), the running statistics it updates, and eval mode; 2-D and 4-D
// inputs, f32 and f64, with and without the affine weight and bias, odd sizes, a channel large
// enough for every thread of the reduction, non-contiguous inputs, an empty batch, and the
// BatchNorm2d module's batch counter staying on the GPU.
//
// Tolerances: the per-channel sums are taken in double on both devices (in different orders),
// then each element costs a few operations in the element type, which the GPU may fuse into
// multiply-adds: f32 results agree to a few float roundings (1e-5 relative and absolute, the
// absolute part for outputs near zero), f64 ones to a few double roundings (1e-12).
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance_for(DType dtype) { return dtype == DType::f64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-5}; }

// Positive random values, as a variance must be: in [0.5, 1.5).
Tensor random_variance(int64_t C, uint64_t seed, DType dtype) {
  return (random_cpu({C}, seed, DType::f64) * 0.5 + 1.0).to(dtype).detach();
}

std::string name_of(const Shape& shape, DType dtype) { return shape_str(shape) + " " + dtype_name(dtype); }

const std::vector<Shape> kShapes = {{7, 5}, {1, 3}, {4, 3, 5, 6}, {3, 2, 1, 1}, {64, 3, 17, 19}};

// The functions under test, on inputs (x, weight, bias) or (x) in training, and on inputs
// (x, weight, bias, running_mean, running_var) or (x, running_mean, running_var) in eval mode.
Tensor train_affine(const std::vector<Tensor>& in) { return batch_norm(in[0], {}, {}, in[1], in[2], true); }
Tensor train_plain(const std::vector<Tensor>& in) { return batch_norm(in[0], {}, {}, {}, {}, true); }
Tensor eval_affine(const std::vector<Tensor>& in) { return batch_norm(in[0], in[3], in[4], in[1], in[2], false); }
Tensor eval_plain(const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], {}, {}, false); }

}  // namespace

TEST(BatchNormGpu, TrainingForwardAndGradientsMatchCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tolerance tol = tolerance_for(dtype);
    for (const Shape& shape : kShapes) {
      if (shape[0] * (shape.size() == 4 ? shape[2] * shape[3] : 1) == 1) continue;  // training needs 2 values
      const int64_t C = shape[1];
      const Tensor x = random_cpu(shape, 1, dtype).requires_grad_(true);
      const Tensor w = random_cpu({C}, 2, dtype).requires_grad_(true);
      const Tensor b = random_cpu({C}, 3, dtype).requires_grad_(true);
      expect_parity(train_affine, {x, w, b}, tol.rtol, tol.atol, "batch_norm train " + name_of(shape, dtype));
      expect_parity(train_plain, {x}, tol.rtol, tol.atol, "batch_norm train, no affine, " + name_of(shape, dtype));
    }
  }
}

TEST(BatchNormGpu, AnInputWithANonZeroMeanMatchesCpu) {
  // Values in [1, 5): the mean is far from 0, so the shift and the centring do real work.
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tolerance tol = tolerance_for(dtype);
    const Tensor x = (random_cpu({50, 4, 3, 3}, 4, DType::f64) * 2.0 + 3.0).to(dtype).detach().requires_grad_(true);
    expect_parity(train_plain, {x}, tol.rtol, tol.atol, std::string("batch_norm, mean 3, ") + dtype_name(dtype));
  }
}

TEST(BatchNormGpu, RunningStatisticsAreUpdatedIdentically) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tolerance tol = tolerance_for(dtype);
    for (const Shape& shape : {Shape{9, 4}, Shape{5, 3, 4, 7}}) {
      const int64_t C = shape[1];
      const Tensor mean_cpu = random_cpu({C}, 5, dtype), var_cpu = random_variance(C, 6, dtype);
      const Tensor mean_gpu = mean_cpu.to(gpu()), var_gpu = var_cpu.to(gpu());
      const Tensor w = random_cpu({C}, 7, dtype), b = random_cpu({C}, 8, dtype);
      const Tensor w_gpu = w.to(gpu()), b_gpu = b.to(gpu());
      // Three steps with different batches, so that each update starts from the previous one.
      for (uint64_t step = 0; step < 3; ++step) {
        const Tensor x = random_cpu(shape, 10 + step, dtype);
        const Tensor out_cpu = batch_norm(x, mean_cpu, var_cpu, w, b, true, 0.3);
        const Tensor out_gpu = batch_norm(x.to(gpu()), mean_gpu, var_gpu, w_gpu, b_gpu, true, 0.3);
        const std::string what = name_of(shape, dtype) + " step " + std::to_string(step);
        expect_close(out_cpu, out_gpu, tol.rtol, tol.atol, "output, " + what);
        expect_close(mean_cpu, mean_gpu, tol.rtol, tol.atol, "running_mean, " + what);
        expect_close(var_cpu, var_gpu, tol.rtol, tol.atol, "running_var, " + what);
      }
    }
  }
}

TEST(BatchNormGpu, EvalModeMatchesCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tolerance tol = tolerance_for(dtype);
    for (const Shape& shape : kShapes) {
      const int64_t C = shape[1];
      const Tensor x = random_cpu(shape, 11, dtype).requires_grad_(true);
      const Tensor w = random_cpu({C}, 12, dtype).requires_grad_(true);
      const Tensor b = random_cpu({C}, 13, dtype).requires_grad_(true);
      const Tensor running_mean = random_cpu({C}, 14, dtype), running_var = random_variance(C, 15, dtype);
      expect_parity(eval_affine, {x, w, b, running_mean, running_var}, tol.rtol, tol.atol,
                    "batch_norm eval " + name_of(shape, dtype));
      expect_parity(eval_plain, {x, running_mean, running_var}, tol.rtol, tol.atol,
                    "batch_norm eval, no affine, " + name_of(shape, dtype));
    }
  }
}

TEST(BatchNormGpu, NonContiguousInputsMatchCpu) {
  const Tolerance tol = tolerance_for(DType::f32);
  const Tensor w = random_cpu({5}, 16).requires_grad_(true), b = random_cpu({5}, 17).requires_grad_(true);
  // (N, C) read through a transpose of (C, N), and (N, C, H, W) through a permutation of
  // (N, H, W, C) (channels last): the views are taken on each device, inside the function.
  const Tensor x2 = random_cpu({5, 8}, 18).requires_grad_(true);
  expect_parity([](const std::vector<Tensor>& in) { return train_affine({in[0].t(), in[1], in[2]}); }, {x2, w, b},
                tol.rtol, tol.atol, "batch_norm on a transposed (8, 5) input");
  const Tensor x4 = random_cpu({3, 4, 6, 5}, 19).requires_grad_(true);
  expect_parity([](const std::vector<Tensor>& in) { return train_affine({in[0].permute({0, 3, 1, 2}), in[1], in[2]}); },
                {x4, w, b}, tol.rtol, tol.atol, "batch_norm on a permuted (3, 5, 4, 6) input");
}

TEST(BatchNormGpu, AnEmptyBatchGivesAnEmptyOutput) {
  const Tensor x = random_cpu({0, 3}, 20).requires_grad_(true);
  const Tensor w = random_cpu({3}, 21).requires_grad_(true), b = random_cpu({3}, 22).requires_grad_(true);
  expect_parity(train_affine, {x, w, b}, 0.0, 0.0, "batch_norm on an empty batch");
}

TEST(BatchNormGpu, TheModuleCountsBatchesOnTheGpu) {
  BatchNorm2d bn(3);
  bn.to(gpu());
  const Tensor x = random_cpu({4, 3, 2, 2}, 23).to(gpu());
  bn.forward(x);
  bn.forward(x);
  bn.eval();
  bn.forward(x);  // eval mode does not count
  EXPECT_TRUE(bn.num_batches_tracked.device() == gpu());
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
}
