// SyncBatchNorm's CUDA kernels against their CPU twins: the packed per-rank statistics
// (batch_norm_local_stats_kernel), the count-weighted merge with the running-statistics update
// (batch_norm_gather_stats_kernel), and the whole op sync_batch_norm, forward and gradients,
// with its collectives simulated in one process (a second "rank" whose row and sums are fixed),
// in f32, f64 and the 16-bit dtypes, including an empty batch.
//
// Tolerances: the statistics are double sums on both devices, in different orders, so the
// packed rows and the merge agree to 1e-12; elementwise results as in test_batch_norm.cpp
// (1e-5 for f32, 1e-12 for f64); 16-bit outputs to a rounding of their own (1e-2).
#include <string>
#include <vector>

#include "distributed/sync_batch_norm.h"
#include "gpu_test_util.h"
#include "tensor/ops/dispatch/batch_norm_kernels.h"
#include "tensor/ops/dispatch/batch_norm_kernels.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

double tolerance_for(DType dtype) {
  if (dtype == DType::f64) return 1e-12;
  return dtype == DType::f32 ? 1e-5 : 1e-2;
}

const std::vector<Shape> kShapes = {{7, 5}, {4, 3, 5, 6}, {0, 3, 4, 4}, {64, 3, 17, 19}};

// A second rank's packed row for C channels: random means, variances in [0.5, 1.5), count 11.
Tensor other_rank_row(int64_t C) {
  const std::vector<double> mean = random_cpu({C}, 91, DType::f64).to_vector<double>();
  const std::vector<double> var = (random_cpu({C}, 92, DType::f64) * 0.5 + 1.0).to_vector<double>();
  std::vector<double> row(mean);
  row.insert(row.end(), var.begin(), var.end());
  row.push_back(11.0);
  return from_vector(row, {1, 2 * C + 1}, TensorOptions().dtype(DType::f64));
}

// sync_batch_norm on (x, weight, bias), as one of two ranks: the all-gather appends the other
// rank's fixed row, the all-reduce adds fixed sums. Runs the same on either device.
Tensor simulated_rank(const std::vector<Tensor>& in) {
  const int64_t C = in[0].size(1);
  BatchNormCollectives collectives;
  collectives.all_gather = [C](const Tensor& local) { return cat({local, other_rank_row(C).to(local.device())}); };
  collectives.all_reduce_sum = [C](const Tensor& sums) {
    sums.copy_(sums + random_cpu({2 * C}, 93, DType::f64).to(sums.dtype()).to(sums.device()));
  };
  return sync_batch_norm(in[0], {}, {}, in[1], in[2], 0.1, 1e-5, collectives);
}

}  // namespace

TEST(SyncBatchNormGpu, PackedLocalStatisticsMatchCpu) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (const Shape& shape : kShapes) {
      // A mean of 3 with spread 1: the two passes have real work to do.
      const Tensor x = (random_cpu(shape, 1, DType::f64) + 3.0).to(dtype).detach();
      const Tensor on_cpu = cpu::batch_norm_local_stats_kernel(x);
      const Tensor on_gpu = cuda::batch_norm_local_stats_kernel(x.to(gpu()));
      EXPECT_EQ(on_gpu.dtype(), DType::f64);
      expect_close(on_cpu, on_gpu, 1e-12, 1e-12, "packed statistics " + shape_str(shape) + " " + dtype_name(dtype));
    }
  }
}

TEST(SyncBatchNormGpu, MergeAndRunningStatisticsMatchCpu) {
  const int64_t C = 6;
  // Three ranks' rows, the middle one empty (count 0, which the merge must skip).
  std::vector<Tensor> rows;
  for (uint64_t r = 0; r < 3; ++r) {
    const Tensor x = (random_cpu({r == 1 ? 0 : 4 + static_cast<int64_t>(r), C, 3, 3}, 20 + r, DType::f64) * 2.0 + 5.0);
    rows.push_back(cpu::batch_norm_local_stats_kernel(x).reshape({1, 2 * C + 1}));
  }
  const Tensor gathered = cat(rows);
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor rm_cpu = random_cpu({C}, 30, dtype), rv_cpu = (random_cpu({C}, 31, dtype) * 0.5 + 1.0).detach();
    const Tensor rm_gpu = rm_cpu.to(gpu()), rv_gpu = rv_cpu.to(gpu());
    auto [mean_cpu, invstd_cpu] = cpu::batch_norm_gather_stats_kernel(gathered, rm_cpu, rv_cpu, 0.3, 1e-5, dtype);
    auto [mean_gpu, invstd_gpu] =
        cuda::batch_norm_gather_stats_kernel(gathered.to(gpu()), rm_gpu, rv_gpu, 0.3, 1e-5, dtype);
    const double tol = dtype == DType::f64 ? 1e-12 : 1e-6;
    const std::string what = std::string(" ") + dtype_name(dtype);
    EXPECT_EQ(mean_gpu.dtype(), dtype);
    expect_close(mean_cpu, mean_gpu, tol, tol, "mean" + what);
    expect_close(invstd_cpu, invstd_gpu, tol, tol, "invstd" + what);
    expect_close(rm_cpu, rm_gpu, tol, tol, "running_mean" + what);
    expect_close(rv_cpu, rv_gpu, tol, tol, "running_var" + what);
    // Without running statistics only the merge runs.
    auto [mean_only, invstd_only] = cuda::batch_norm_gather_stats_kernel(gathered.to(gpu()), {}, {}, 0.3, 1e-5, dtype);
    expect_close(mean_cpu, mean_only, tol, tol, "mean without running statistics" + what);
    expect_close(invstd_cpu, invstd_only, tol, tol, "invstd without running statistics" + what);
  }
}

TEST(SyncBatchNormGpu, OpForwardAndGradientsMatchCpu) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const double tol = tolerance_for(dtype);
    // 16-bit inputs keep f32 weight and bias (mixed batch norm, as under autocast).
    const DType channel = dtype == DType::f64 ? DType::f64 : DType::f32;
    for (const Shape& shape : kShapes) {
      const int64_t C = shape[1];
      const Tensor x = random_cpu(shape, 40, dtype).requires_grad_(true);
      const Tensor w = random_cpu({C}, 41, channel).requires_grad_(true);
      const Tensor b = random_cpu({C}, 42, channel).requires_grad_(true);
      expect_parity(simulated_rank, {x, w, b}, tol, tol, "sync_batch_norm " + shape_str(shape) + " " + dtype_name(dtype));
    }
  }
}
