// SyncBatchNorm under mpirun (2 and 3 ranks): N ranks must compute what one process computes on
// the union of their batches (outputs, every gradient, running statistics), with equal,
// unequal and empty per-rank batches; eval mode must stay off the wire; convert_sync_batchnorm
// must keep a model's state_dict and really route its forward through SyncBatchNorm; DDP must
// keep the ranks in lockstep; bf16 autocast must keep f32 statistics.
//
// Every rank makes the same union batch from one seed and takes its own rows of it, so the
// one-process reference is computed on every rank. Assertions come after the collectives, so a
// failing check cannot leave another rank waiting in one.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "distributed/sync_batch_norm.h"
#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::gather_from_all;
using test::group;

// |a - b| <= tol * (1 + |b|) elementwise.
void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  ASSERT_EQ(av.size(), bv.size()) << what;
  for (size_t i = 0; i < av.size(); ++i) {
    EXPECT_NEAR(av[i], bv[i], tol * (1 + std::abs(bv[i]))) << what << ", element " << i;
  }
}

// Elementwise sum over ranks of a tensor each rank holds, as a tensor shaped like `t`.
Tensor sum_over_ranks(const Tensor& t) {
  std::vector<double> total(static_cast<size_t>(t.numel()), 0.0);
  for (const auto& copy : gather_from_all(t)) {
    for (size_t i = 0; i < total.size(); ++i) total[i] += copy[i];
  }
  return from_vector(total, t.shape(), TensorOptions().dtype(DType::f64));
}

// Where rank r's rows start in the union batch, for per-rank batch sizes `sizes`.
int64_t first_row(const std::vector<int64_t>& sizes, int rank) {
  int64_t start = 0;
  for (int r = 0; r < rank; ++r) start += sizes[r];
  return start;
}

// Copies `from`'s parameter and buffer values into `to` (same layout).
void copy_state(const BatchNorm2d& from, BatchNorm2d& to) {
  NoGradGuard no_grad;
  to.weight.copy_(from.weight);
  to.bias.copy_(from.bias);
  to.running_mean.copy_(from.running_mean);
  to.running_var.copy_(from.running_var);
}

// ---- N ranks == one process on the union batch ----------------------------------------------

struct UnionCase {
  std::string name;
  // Per-rank batch sizes for rank r of a world of `world`.
  std::vector<int64_t> (*sizes)(int world);
  bool images;  // (N, C, H, W) input; otherwise (N, C)
};

// gtest names a failing case by this.
void PrintTo(const UnionCase& c, std::ostream* out) { *out << c.name; }

std::vector<int64_t> equal_sizes(int world) { return std::vector<int64_t>(world, 2); }
std::vector<int64_t> unequal_sizes(int world) {
  std::vector<int64_t> s;
  for (int r = 0; r < world; ++r) s.push_back(2 + r);
  return s;
}
// Rank 1 has no images at all: it must still join both collectives and weigh nothing.
std::vector<int64_t> one_empty_rank(int world) {
  std::vector<int64_t> s = unequal_sizes(world);
  s[1] = 0;
  return s;
}
std::vector<int64_t> one_image_each(int world) { return std::vector<int64_t>(world, 1); }

class SyncBatchNormUnion : public testing::TestWithParam<UnionCase> {};

TEST_P(SyncBatchNormUnion, MatchesOneProcessOnTheUnionBatch) {
  const UnionCase& c = GetParam();
  const int rank = group().rank(), world = group().size();
  const std::vector<int64_t> sizes = c.sizes(world);
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  const int64_t C = 3, start = first_row(sizes, rank), mine = sizes[rank];
  const auto f64 = TensorOptions().dtype(DType::f64);

  // The same layer twice: the reference for one process, and the synchronised one.
  BatchNorm2d reference(C, 1e-5, 0.3);
  SyncBatchNorm sync(C, 1e-5, 0.3);
  reference.to(DType::f64);
  sync.to(DType::f64);
  Generator gen(42);
  {
    NoGradGuard no_grad;
    reference.weight.copy_(randn({C}, f64, &gen));
    reference.bias.copy_(randn({C}, f64, &gen));
    reference.running_mean.copy_(randn({C}, f64, &gen));
    reference.running_var.copy_(rand({C}, f64, &gen) + 0.5);
  }
  copy_state(reference, sync);

  // Two steps, so the running statistics compound and the counter reaches 2.
  for (int step = 0; step < 2; ++step) {
    const Shape shape = c.images ? Shape{total, C, 4, 5} : Shape{total, C};
    // A mean far from zero tests the merge's numerics (no E[x^2] - E[x]^2 cancellation).
    const Tensor x_all = (randn(shape, f64, &gen) * 2.0 + 7.0).detach();
    const Tensor g_all = randn(shape, f64, &gen).detach();  // dLoss/dOutput
    const Tensor x_ref = x_all.clone().requires_grad_(true);
    reference.zero_grad();
    // BatchNorm2d takes images only; (N, C) rows go through its op directly.
    const Tensor out_ref = c.images ? reference(x_ref)
                                    : batch_norm(x_ref, reference.running_mean, reference.running_var,
                                                 reference.weight, reference.bias, true, 0.3, 1e-5);
    sum(out_ref * g_all).backward();

    const Tensor x = x_all.slice(0, start, start + mine).clone().requires_grad_(true);
    sync.zero_grad();
    const uint64_t before = group().sequence_number();
    const Tensor out = sync(x);
    const uint64_t after_forward = group().sequence_number();
    sum(out * g_all.slice(0, start, start + mine)).backward();
    const uint64_t after_backward = group().sequence_number();

    // Collectives first, on every rank: the weight and bias gradients are local sums.
    const Tensor weight_grad = sum_over_ranks(sync.weight.grad());
    const Tensor bias_grad = sum_over_ranks(sync.bias.grad());

    const std::string at = c.name + ", step " + std::to_string(step) + ", rank " + std::to_string(rank);
    EXPECT_EQ(after_forward - before, 1u) << at << ": forward is one all-gather";
    EXPECT_EQ(after_backward - after_forward, 1u) << at << ": backward is one all-reduce";
    expect_close(out, out_ref.slice(0, start, start + mine), 1e-10, at + ": output");
    ASSERT_TRUE(x.grad().defined()) << at;
    expect_close(x.grad(), x_ref.grad().slice(0, start, start + mine), 1e-10, at + ": input gradient");
    expect_close(weight_grad, reference.weight.grad(), 1e-10, at + ": weight gradient summed over ranks");
    expect_close(bias_grad, reference.bias.grad(), 1e-10, at + ": bias gradient summed over ranks");
    expect_close(sync.running_mean, reference.running_mean, 1e-12, at + ": running_mean");
    expect_close(sync.running_var, reference.running_var, 1e-12, at + ": running_var (unbiased, total count)");
    EXPECT_EQ(sync.num_batches_tracked.item<int64_t>(), step + 1) << at;
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, SyncBatchNormUnion,
                         testing::Values(UnionCase{"equal", equal_sizes, true},
                                         UnionCase{"unequal", unequal_sizes, true},
                                         UnionCase{"empty_rank", one_empty_rank, true},
                                         UnionCase{"one_image_each", one_image_each, true},
                                         UnionCase{"unequal_2d", unequal_sizes, false},
                                         UnionCase{"one_row_each_2d", one_image_each, false}),
                         [](const testing::TestParamInfo<UnionCase>& info) { return info.param.name; });

// One value per channel in the whole global batch has no variance to estimate: every rank
// throws the same error (after the all-gather, so none is left waiting), as PyTorch refuses it.
TEST(SyncBatchNorm, OneValuePerChannelOverAllRanksIsAnErrorOnEveryRank) {
  SyncBatchNorm sync(2);
  const Tensor x = randn({group().rank() == 0 ? 1 : 0, 2});  // x: (1 or 0, C)
  test::expect_error([&] { sync(x); }, "expected more than 1 value per channel over all ranks");
  // The ranks are still in step: a collective afterwards completes.
  group().barrier();
}

// ---- eval mode ------------------------------------------------------------------------------

// Eval mode normalises with the running statistics: no collective at all, and exactly the
// BatchNorm2d result, on every rank's own data.
TEST(SyncBatchNorm, EvalModeRunsNoCollectiveAndMatchesBatchNorm2d) {
  Generator gen(7 + group().rank());
  BatchNorm2d plain(4);
  SyncBatchNorm sync(4);
  {
    NoGradGuard no_grad;
    plain.running_mean.copy_(randn({4}, {}, &gen));
    plain.running_var.copy_(rand({4}, {}, &gen) + 0.5);
    plain.weight.copy_(randn({4}, {}, &gen));
  }
  copy_state(plain, sync);
  plain.eval();
  sync.eval();
  const Tensor x = randn({group().rank() + 1, 4, 3, 3}, {}, &gen).requires_grad_(true);
  const uint64_t before = group().sequence_number();
  const Tensor out = sync(x);
  sum(out).backward();
  EXPECT_EQ(group().sequence_number(), before) << "eval mode must not start a collective";
  EXPECT_EQ(out.to_vector<double>(), plain(x).to_vector<double>());
  EXPECT_EQ(sync.num_batches_tracked.item<int64_t>(), 0);
}

// ---- convert_sync_batchnorm -----------------------------------------------------------------

// Counts the SyncBatchNorm and the plain BatchNorm2d layers of a model.
void count_norms(const Module& m, int& sync, int& plain) {
  for (const auto& child : m.children()) {
    if (dynamic_cast<const SyncBatchNorm*>(child.get()) != nullptr) {
      ++sync;
    } else if (dynamic_cast<const BatchNorm2d*>(child.get()) != nullptr) {
      ++plain;
    }
    count_norms(*child, sync, plain);
  }
}

class ConvertModels : public testing::TestWithParam<std::string> {};

// Keys in the same order, values bitwise, dtypes and requires_grad kept; every BatchNorm2d
// swapped (ResNet-8 has 9), none left.
TEST_P(ConvertModels, KeepsTheStateDictBitwise) {
  manual_seed(11);
  std::shared_ptr<Module> model = make_model(GetParam());
  {
    // Non-default buffers, so a lost copy would show.
    NoGradGuard no_grad;
    for (const auto& [name, b] : model->named_buffers()) {
      if (is_floating(b.dtype())) b.copy_(rand(b.shape()) + 0.25);
      else b.fill_(5.0);
    }
    model->parameters().back().requires_grad_(false);
  }
  model->eval();
  std::vector<std::pair<std::string, Tensor>> before;
  for (const auto& [key, t] : model->state_dict()) before.emplace_back(key, t.clone());
  const std::vector<bool> grad_flags = [&] {
    std::vector<bool> flags;
    for (const Tensor& p : model->parameters()) flags.push_back(p.requires_grad());
    return flags;
  }();

  std::shared_ptr<Module> converted = convert_sync_batchnorm(model);
  const auto after = converted->state_dict();
  ASSERT_EQ(after.size(), before.size());
  size_t i = 0;
  for (const auto& [key, t] : after) {
    EXPECT_EQ(key, before[i].first);
    EXPECT_EQ(t.dtype(), before[i].second.dtype()) << key;
    EXPECT_EQ(t.to_vector<double>(), before[i].second.to_vector<double>()) << key;
    ++i;
  }
  std::vector<bool> converted_flags;
  for (const Tensor& p : converted->parameters()) converted_flags.push_back(p.requires_grad());
  EXPECT_EQ(converted_flags, grad_flags);
  EXPECT_FALSE(converted->is_training());
  int sync = 0, plain = 0;
  count_norms(*converted, sync, plain);
  EXPECT_EQ(plain, 0);
  EXPECT_EQ(sync, GetParam() == "resnet" ? 9 : 0);
}

INSTANTIATE_TEST_SUITE_P(Models, ConvertModels, testing::Values("mlp", "cnn", "resnet"));

// The proof that the converted ResNet's forward really goes through SyncBatchNorm (its typed
// members re-pointed): on rows of one union batch, its outputs are the one-process ResNet's,
// and every parameter gradient summed over ranks is the one-process gradient.
TEST(ConvertSyncBatchnorm, ConvertedResNetMatchesOneProcessOnTheUnionBatch) {
  const int rank = group().rank(), world = group().size();
  manual_seed(3);
  std::shared_ptr<Module> reference = make_model("resnet");
  manual_seed(3);
  std::shared_ptr<Module> sync = convert_sync_batchnorm(make_model("resnet"));
  reference->to(DType::f64);
  sync->to(DType::f64);
  const auto resnet = std::dynamic_pointer_cast<ResNet>(sync);
  ASSERT_NE(resnet, nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<SyncBatchNorm>(resnet->bn1), nullptr) << "ResNet::bn1 not re-pointed";
  const auto block = std::dynamic_pointer_cast<BasicBlock>((*resnet->layer2)[0]);
  ASSERT_NE(block, nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<SyncBatchNorm>(block->bn2), nullptr) << "BasicBlock::bn2 not re-pointed";

  const std::vector<int64_t> sizes = unequal_sizes(world);
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  const int64_t start = first_row(sizes, rank);
  Generator gen(5);
  const auto f64 = TensorOptions().dtype(DType::f64);
  const Tensor x_all = randn({total, 3, 8, 8}, f64, &gen);
  const Tensor g_all = randn({total, 10}, f64, &gen);

  const Tensor out_ref = (*reference)(x_all);
  sum(out_ref * g_all).backward();
  const Tensor out = (*sync)(x_all.slice(0, start, start + sizes[rank]));
  sum(out * g_all.slice(0, start, start + sizes[rank])).backward();

  std::vector<Tensor> grad_sums;
  for (const Tensor& p : sync->parameters()) grad_sums.push_back(sum_over_ranks(p.grad()));
  expect_close(out, out_ref.slice(0, start, start + sizes[rank]), 1e-9, "ResNet output");
  const auto ref_params = reference->named_parameters();
  for (size_t i = 0; i < grad_sums.size(); ++i) {
    expect_close(grad_sums[i], ref_params[i].second.grad(), 1e-8, ref_params[i].first + " gradient summed over ranks");
  }
  const auto ref_buffers = reference->named_buffers(), sync_buffers = sync->named_buffers();
  for (size_t i = 0; i < ref_buffers.size(); ++i) {
    expect_close(sync_buffers[i].second, ref_buffers[i].second, 1e-10, ref_buffers[i].first);
  }
}

// ---- inside DistributedDataParallel ----------------------------------------------------------

// Each rank starts from its own weights and trains on its own data: after two steps the
// parameters and the buffers (global statistics) are bitwise identical on every rank. The first
// step's averaged gradients equal one process's on the union batch (equal per-rank batches,
// mean loss), which plain BatchNorm2d would not give.
TEST(SyncBatchNorm, InsideDdpTwoStepsKeepRanksInLockstep) {
  const int rank = group().rank(), world = group().size();
  manual_seed(21);
  std::shared_ptr<Module> reference = make_model("resnet");
  manual_seed(100 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(convert_sync_batchnorm(make_model("resnet")));
  {
    // The reference starts from rank 0's weights, which DDP just broadcast.
    NoGradGuard no_grad;
    const auto mine = ddp->module().parameters(), theirs = reference->parameters();
    for (size_t i = 0; i < mine.size(); ++i) theirs[i].copy_(mine[i]);
  }
  SGD opt(ddp->parameters(), SGDOptions(0.05).momentum(0.9));
  const int64_t batch = 3;
  for (int step = 0; step < 2; ++step) {
    Generator gen(500 + step);
    const Tensor x_all = randn({batch * world, 3, 8, 8}, {}, &gen);
    std::vector<int64_t> labels(static_cast<size_t>(batch * world));
    for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
    const Tensor y_all = from_vector(labels, {batch * world});
    opt.zero_grad();
    cross_entropy((*ddp)(x_all.slice(0, rank * batch, (rank + 1) * batch)),
                  y_all.slice(0, rank * batch, (rank + 1) * batch)).backward();
    if (step == 0) {
      reference->zero_grad();
      cross_entropy((*reference)(x_all), y_all).backward();
      const auto mine = ddp->module().named_parameters();
      const auto theirs = reference->parameters();
      for (size_t i = 0; i < mine.size(); ++i) {
        expect_close(mine[i].second.grad(), theirs[i].grad(), 2e-4, mine[i].first + " averaged gradient");
      }
    }
    opt.step();
  }
  for (const auto& [name, p] : ddp->module().named_parameters()) test::expect_same_on_every_rank(p, name);
  for (const auto& [name, b] : ddp->module().named_buffers()) test::expect_same_on_every_rank(b, name);
}

// ---- autocast --------------------------------------------------------------------------------

// Under bf16 autocast on the CPU the convolution hands SyncBatchNorm a bf16 tensor: the
// statistics and running buffers stay f32, the output is bf16, and it is close to the same
// model's f32 output. The statistics of the same bf16 values in f32 are bitwise the same.
TEST(SyncBatchNorm, AutocastBf16KeepsF32Statistics) {
  const int rank = group().rank();
  Generator gen(31);
  const Tensor x_all = randn({2 * group().size(), 4, 6, 6}, {}, &gen);
  const Tensor x = x_all.slice(0, 2 * rank, 2 * rank + 2);

  // The statistics themselves: a bf16 input against f32 copies of the same values.
  SyncBatchNorm low(4), high(4);
  const Tensor x16 = x.to(DType::bf16);
  Tensor out16;
  {
    AutocastGuard autocast(DeviceType::CPU, DType::bf16);
    out16 = low(x16);
  }
  const Tensor out32 = high(x16.to(DType::f32));
  EXPECT_EQ(out16.dtype(), DType::bf16);
  EXPECT_EQ(low.running_mean.dtype(), DType::f32);
  EXPECT_EQ(low.running_mean.to_vector<double>(), high.running_mean.to_vector<double>());
  EXPECT_EQ(low.running_var.to_vector<double>(), high.running_var.to_vector<double>());
  // One bf16 rounding of the output (8 significant bits).
  expect_close(out16.to(DType::f32), out32, 1.0 / 128, "bf16 output");

  // A convolution in front, as in a real model: gradients come back in f32.
  manual_seed(9);
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(4, 5, 3), std::make_shared<BatchNorm2d>(5));
  manual_seed(9);
  auto model32 = std::make_shared<Sequential>(std::make_shared<Conv2d>(4, 5, 3), std::make_shared<BatchNorm2d>(5));
  auto converted = convert_sync_batchnorm(model);
  auto converted32 = convert_sync_batchnorm(model32);
  Tensor y;
  {
    AutocastGuard autocast(DeviceType::CPU, DType::bf16);
    y = (*converted)(x);
  }
  sum(y.to(DType::f32)).backward();
  const Tensor y32 = (*converted32)(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  const auto norm = std::dynamic_pointer_cast<SyncBatchNorm>((*std::dynamic_pointer_cast<Sequential>(converted))[1]);
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->weight.grad().dtype(), DType::f32);
  EXPECT_EQ(norm->running_var.dtype(), DType::f32);
  // bf16 convolution inputs and weights (8 bits each), then normalised to unit variance.
  expect_close(y.to(DType::f32), y32, 0.05, "autocast output against f32");
}

// ---- CUDA tensors over the MPI group (host staging) ---------------------------------------------

// The same layer on each rank's GPU gives the CPU layer's output, input gradient and running
// statistics (f64, so the devices differ only in the order of their additions). Skipped unless
// every rank has a GPU; the ranks agree on skipping, so none waits in a collective.
TEST(SyncBatchNorm, CudaTensorsMatchTheCpu) {
  const Tensor no_gpu_somewhere = full({1}, cuda_device_count() > 0 ? 0 : 1, TensorOptions().dtype(DType::i32));
  group().all_reduce(no_gpu_somewhere, ReduceOp::Max);
  if (no_gpu_somewhere.item<int32_t>() == 1) GTEST_SKIP() << "needs a CUDA device on every rank's machine";
  const Device gpu = Device::cuda(mpi::node_rank_and_size().first % cuda_device_count());
  const int rank = group().rank();
  const auto f64 = TensorOptions().dtype(DType::f64);
  Generator gen(77 + rank);
  const Tensor x_cpu = randn({2 + rank, 3, 5, 5}, f64, &gen).requires_grad_(true);
  const Tensor g = randn({2 + rank, 3, 5, 5}, f64, &gen);
  const Tensor x_gpu = x_cpu.detach().to(gpu).requires_grad_(true);
  SyncBatchNorm on_cpu(3), on_gpu(3);
  on_cpu.to(DType::f64);
  on_gpu.to(DType::f64).to(gpu);
  const Tensor out_cpu = on_cpu(x_cpu);
  sum(out_cpu * g).backward();
  const Tensor out_gpu = on_gpu(x_gpu);
  sum(out_gpu * g.to(gpu)).backward();
  expect_close(out_gpu.to(Device::cpu()), out_cpu, 1e-10, "output");
  expect_close(x_gpu.grad().to(Device::cpu()), x_cpu.grad(), 1e-10, "input gradient");
  expect_close(on_gpu.weight.grad().to(Device::cpu()), on_cpu.weight.grad(), 1e-10, "weight gradient");
  expect_close(on_gpu.running_var.to(Device::cpu()), on_cpu.running_var, 1e-12, "running_var");
}

}  // namespace
}  // namespace lockstep
