// SyncBatchNorm without MPI: the op sync_batch_norm with the ranks simulated in one process
// (their collectives replaced by the sums they would return), the merge of per-rank statistics,
// the one-process fallback, and convert_sync_batchnorm / Module::replace_module on model trees.
// The real multi-rank checks are tests/mpi/test_sync_batch_norm.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "distributed/sync_batch_norm.h"
#include "tensor/ops/dispatch/batch_norm_kernels.h"
#include "test_util.h"

namespace lockstep {
namespace {

const TensorOptions kF64 = TensorOptions().dtype(DType::f64);

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  ASSERT_EQ(av.size(), bv.size()) << what;
  for (size_t i = 0; i < av.size(); ++i) EXPECT_NEAR(av[i], bv[i], tol * (1 + std::abs(bv[i]))) << what << " [" << i << "]";
}

// ---- the op, with simulated ranks ------------------------------------------------------------

// Three simulated ranks with 2, 0 and 3 images: each rank's forward and backward, fed the
// collectives' results, equals batch_norm on the concatenated batch.
TEST(SyncBatchNormOp, SimulatedRanksMatchBatchNormOnTheUnion) {
  const std::vector<int64_t> sizes = {2, 0, 3};
  const int64_t C = 3, total = 5;
  Generator gen(1);
  const Tensor x_all = (randn({total, C, 3, 4}, kF64, &gen) * 3.0 - 2.0).detach();  // x: (N, C, H, W)
  const Tensor g_all = randn({total, C, 3, 4}, kF64, &gen).detach();
  const Tensor weight = randn({C}, kF64, &gen).detach(), bias = randn({C}, kF64, &gen).detach();
  std::vector<Tensor> x, g;
  for (int64_t r = 0, start = 0; r < 3; start += sizes[r], ++r) {
    x.push_back(x_all.slice(0, start, start + sizes[r]).clone());
    g.push_back(g_all.slice(0, start, start + sizes[r]).clone());
  }

  // Reference: one process.
  const Tensor ref_rm = zeros({C}, kF64), ref_rv = ones({C}, kF64);
  const Tensor x_ref = x_all.clone().requires_grad_(true);
  const Tensor w_ref = weight.clone().requires_grad_(true), b_ref = bias.clone().requires_grad_(true);
  const Tensor out_ref = batch_norm(x_ref, ref_rm, ref_rv, w_ref, b_ref, true, 0.1, 1e-5);
  sum(out_ref * g_all).backward();

  // What the collectives return: every rank's packed row, and the sums over ranks of the
  // backward's per-channel sums, taken about the global mean.
  std::vector<Tensor> rows;
  for (const Tensor& xr : x) rows.push_back(cpu::batch_norm_local_stats_kernel(xr).reshape({1, 2 * C + 1}));
  const Tensor gathered = cat(rows);
  const Tensor global_mean = cpu::batch_norm_gather_stats_kernel(gathered, {}, {}, 0.1, 1e-5, DType::f64).first;
  Tensor sums = zeros({2 * C}, kF64);
  for (int r = 0; r < 3; ++r) {
    auto [sdy, sdx] = cpu::batch_norm_backward_reduce_kernel(g[r], x[r], global_mean);
    sums = sums + cat({sdy, sdx});
  }

  Tensor weight_grad = zeros({C}, kF64), bias_grad = zeros({C}, kF64);
  for (int r = 0; r < 3; ++r) {
    const Tensor rm = zeros({C}, kF64), rv = ones({C}, kF64);
    const Tensor xr = x[r].clone().requires_grad_(true);
    const Tensor w = weight.clone().requires_grad_(true), b = bias.clone().requires_grad_(true);
    int gathers = 0, reduces = 0;
    BatchNormCollectives collectives;
    collectives.all_gather = [&](const Tensor& local) {
      ++gathers;
      EXPECT_EQ(local.to_vector<double>(), rows[r].to_vector<double>()) << "rank " << r << "'s packed row";
      return gathered.clone();
    };
    collectives.all_reduce_sum = [&](const Tensor& local_sums) {
      ++reduces;
      local_sums.copy_(sums);
    };
    const Tensor out = sync_batch_norm(xr, rm, rv, w, b, 0.1, 1e-5, collectives);
    sum(out * g[r]).backward();
    EXPECT_EQ(gathers, 1);
    EXPECT_EQ(reduces, 1);
    const int64_t start = r == 0 ? 0 : sizes[0] + (r == 2 ? sizes[1] : 0);
    const std::string at = "rank " + std::to_string(r);
    expect_close(out, out_ref.slice(0, start, start + sizes[r]), 1e-12, at + " output");
    expect_close(xr.grad(), x_ref.grad().slice(0, start, start + sizes[r]), 1e-12, at + " input gradient");
    expect_close(rm, ref_rm, 1e-13, at + " running_mean");
    expect_close(rv, ref_rv, 1e-13, at + " running_var");
    weight_grad = weight_grad + w.grad();
    bias_grad = bias_grad + b.grad();
  }
  expect_close(weight_grad, w_ref.grad(), 1e-12, "weight gradient summed over ranks");
  expect_close(bias_grad, b_ref.grad(), 1e-12, "bias gradient summed over ranks");
}

// Chan's merge keeps the variance of data far from zero: pieces of values near 1e6 with unit
// spread, merged, give the two-pass variance of the whole to 1e-9 (summing x and x^2 would
// lose about 12 of f64's 16 digits to cancellation).
TEST(SyncBatchNormOp, MergeIsAccurateForLargeMeans) {
  Generator gen(2);
  const Tensor x = (randn({9, 2}, kF64, &gen) + 1e6).detach();  // x: (N, C)
  const std::vector<std::pair<int64_t, int64_t>> pieces = {{0, 2}, {2, 2}, {2, 7}, {7, 9}};
  std::vector<Tensor> rows;
  for (auto [a, b] : pieces) rows.push_back(cpu::batch_norm_local_stats_kernel(x.slice(0, a, b)).reshape({1, 5}));
  const Tensor rm = zeros({2}, kF64), rv = zeros({2}, kF64);
  auto [mean, invstd] = cpu::batch_norm_gather_stats_kernel(cat(rows), rm, rv, 1.0, 0.0, DType::f64);
  const Tensor whole = cpu::batch_norm_local_stats_kernel(x);  // [mean (2) | var (2) | count]
  expect_close(mean, whole.slice(0, 0, 2), 1e-15, "mean");
  const Tensor var = 1.0 / (invstd * invstd);
  expect_close(var, whole.slice(0, 2, 4), 1e-9, "biased variance");
  // momentum 1: the running statistics are the batch's, the variance unbiased (n = 9).
  expect_close(rv, whole.slice(0, 2, 4) * (9.0 / 8.0), 1e-9, "unbiased running variance");
  EXPECT_EQ(whole.to_vector<double>()[4], 9.0);
}

TEST(SyncBatchNormOp, OneValuePerChannelInTotalIsAnError) {
  BatchNormCollectives collectives;
  collectives.all_gather = [](const Tensor& local) { return local.clone(); };
  collectives.all_reduce_sum = [](const Tensor&) {};
  test::expect_error([&] { sync_batch_norm(randn({1, 3}), {}, {}, {}, {}, 0.1, 1e-5, collectives); },
                     "expected more than 1 value per channel over all ranks");
}

// ---- the module without a process group --------------------------------------------------------

// No init_process_group: SyncBatchNorm is BatchNorm2d, bit for bit (PyTorch's fallback).
TEST(SyncBatchNorm, WithoutProcessGroupIsBatchNorm2d) {
  ASSERT_FALSE(is_initialized());
  BatchNorm2d plain(3);
  SyncBatchNorm sync(3);
  const Tensor x = randn({4, 3, 5, 5});
  EXPECT_EQ(sync(x).to_vector<double>(), plain(x).to_vector<double>());
  EXPECT_EQ(sync.running_var.to_vector<double>(), plain.running_var.to_vector<double>());
  EXPECT_EQ(sync.num_batches_tracked.item<int64_t>(), 1);
  EXPECT_EQ(sync.str(), "SyncBatchNorm(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  EXPECT_NE(std::dynamic_pointer_cast<SyncBatchNorm>(sync.clone_structure()), nullptr);
  test::expect_error([&] { sync(randn({2, 4, 3, 3})); }, "SyncBatchNorm: expected 3 channels");
}

// ---- convert_sync_batchnorm and replace_module --------------------------------------------------

TEST(ConvertSyncBatchnorm, ConvertsALoneLayerAndLeavesSyncLayersAlone) {
  auto bn = std::make_shared<BatchNorm2d>(4, 1e-3, 0.2);
  {
    NoGradGuard no_grad;
    bn->weight.copy_(randn({4}));
  }
  bn->bias.requires_grad_(false);
  bn->eval();
  auto converted = std::dynamic_pointer_cast<SyncBatchNorm>(convert_sync_batchnorm(bn));
  ASSERT_NE(converted, nullptr);
  EXPECT_EQ(converted->eps, 1e-3);
  EXPECT_EQ(converted->momentum, 0.2);
  EXPECT_EQ(converted->weight.to_vector<double>(), bn->weight.to_vector<double>());
  EXPECT_FALSE(converted->bias.requires_grad());
  EXPECT_TRUE(converted->weight.requires_grad());
  EXPECT_FALSE(converted->is_training());
  // Copies, not shared handles (see the header).
  EXPECT_NE(converted->weight.data_ptr<float>(), bn->weight.data_ptr<float>());
  EXPECT_EQ(convert_sync_batchnorm(converted), converted);
}

TEST(ConvertSyncBatchnorm, KeepsDtypeAndReplacesInsideSequential) {
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 2, 3), std::make_shared<BatchNorm2d>(2));
  model->to(DType::f64);
  auto converted = std::dynamic_pointer_cast<Sequential>(convert_sync_batchnorm(model));
  ASSERT_EQ(converted, model);  // children replaced in place
  auto norm = std::dynamic_pointer_cast<SyncBatchNorm>((*converted)[1]);
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->weight.dtype(), DType::f64);
  EXPECT_EQ(norm->num_batches_tracked.dtype(), DType::i64);
}

TEST(ReplaceModule, RepointsResNetMembersAndRefusesWrongTypes) {
  ResNet resnet;
  const auto old_bn1 = resnet.bn1;
  auto sync = std::make_shared<SyncBatchNorm>(16);
  EXPECT_EQ(resnet.replace_module("bn1", sync), old_bn1);
  EXPECT_EQ(resnet.bn1, sync);
  // A Linear cannot stand where forward calls a BatchNorm2d: refused, tree unchanged.
  test::expect_error([&] { resnet.replace_module("bn1", std::make_shared<Linear>(2, 2)); },
                     "ResNet's \"bn1\" must be a BatchNorm2d");
  EXPECT_EQ(resnet.bn1, sync);
  EXPECT_EQ(resnet.named_children()[1].second, sync);
  test::expect_error([&] { resnet.replace_module("bn9", sync); }, "ResNet has no child module named \"bn9\"");
}

}  // namespace
}  // namespace lockstep
