// Mixed precision under DistributedDataParallel: the compression hooks (gradients sent in f16 or
// bf16) and GradScaler, whose skipped steps every rank must agree on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::gather_from_all;
using test::group;

// A batch of random (N, 1, 28, 28) images and labels for the MLP, one per seed.
struct Batch {
  Tensor x;
  Tensor y;
};

Batch make_batch(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> labels(n);
  for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
  return {randn({n, 1, 28, 28}, {}, &gen), from_vector(labels, {n})};
}

// Small caps: the MLP's gradients travel in several buckets.
DistributedDataParallelOptions options(CommHook hook) {
  return DistributedDataParallelOptions().first_bucket_cap_mb(0.001).bucket_cap_mb(0.1).comm_hook(hook);
}

DType wire_dtype(CommHook hook) { return hook == CommHook::fp16_compress ? DType::f16 : DType::bf16; }

// The 16-bit value of `dtype` nearest to `v`.
double round16(DType dtype, double v) {
  const auto f = static_cast<float>(v);
  return dtype == DType::f16 ? static_cast<float>(Half(f)) : static_cast<float>(BFloat16(f));
}

std::string hook_test_name(const testing::TestParamInfo<CommHook>& info) { return comm_hook_name(info.param); }

// ---- the compression hooks ---------------------------------------------------------------------

class CompressHooks : public testing::TestWithParam<CommHook> {};

// Every rank's gradient is the same 16-bit-valued average, within the roundoff of the format:
// each rank's share g/W is rounded to 16 bits once, and each of the W - 1 additions of the
// all-reduce rounds once more, each by at most u (the unit roundoff: 2^-11 for f16, 2^-8 for
// bf16) of the magnitudes summed, which are at most sum |g_r| / W. Around zero, where 16-bit
// numbers are subnormal, a rounding may also be off by half the smallest spacing, eta. f32's own
// roundings (the division by W) add 2^-24 each.
TEST_P(CompressHooks, GradientsAgreeBitwiseAndMatchTheAverageWithinRoundoff) {
  const CommHook hook = GetParam();
  const DType wire = wire_dtype(hook);
  const int rank = group().rank(), world = group().size();
  const double u = wire == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double eta = wire == DType::f16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134);
  manual_seed(31 + rank);
  std::shared_ptr<Module> model = make_model("mlp");
  DistributedDataParallel ddp(model, options(hook));
  ASSERT_GE(ddp.buckets().size(), 2u);
  for (const BucketSummary& bucket : ddp.buckets()) EXPECT_EQ(bucket.comm_bytes * 2, bucket.bytes) << "half the bytes";

  const Batch mine = make_batch(8, 70 + rank);
  // Each rank's own gradients first: a backward through the wrapped module alone stays local.
  cross_entropy(ddp.module()(mine.x), mine.y).backward();
  std::vector<std::vector<std::vector<double>>> local;  // [parameter][rank][element]
  for (const Tensor& p : model->parameters()) local.push_back(gather_from_all(p.grad()));
  model->zero_grad();
  cross_entropy(ddp(mine.x), mine.y).backward();

  const auto params = model->named_parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& [name, p] = params[k];
    test::expect_same_on_every_rank(p.grad(), name + "'s gradient");
    const std::vector<double> got = p.grad().to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      double mean = 0, magnitude = 0;
      for (int r = 0; r < world; ++r) {
        mean += local[k][r][i] / world;
        magnitude += std::abs(local[k][r][i]) / world;
      }
      const double tolerance = (world * u * (1 + world * u) + 4 * std::ldexp(1.0, -24)) * magnitude + world * eta;
      ASSERT_LE(std::abs(got[i] - mean), tolerance) << name << ", element " << i << ": the average is " << mean;
      ASSERT_EQ(got[i], round16(wire, got[i]))
          << name << ", element " << i << " is no " << dtype_name(wire) << " value";
    }
  }
}

// Training with a hook keeps every rank's parameters bitwise identical.
TEST_P(CompressHooks, ParametersStayBitwiseIdenticalAfterSteps) {
  const int rank = group().rank(), world = group().size();
  manual_seed(32 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"), options(GetParam()));
  const Tensor first = ddp->module().parameters().front().clone();
  SGD opt(ddp->parameters(), SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    const Batch b = make_batch(8, 2000 + step * world + rank);
    opt.zero_grad();
    cross_entropy((*ddp)(b.x), b.y).backward();
    opt.step();
  }
  for (const auto& [name, p] : ddp->module().named_parameters()) test::expect_same_on_every_rank(p, name);
  EXPECT_NE(ddp->module().parameters().front().to_vector<double>(), first.to_vector<double>());
  const InSyncReport report = check_in_sync(ddp->module(), group());
  EXPECT_TRUE(report.in_sync) << report.difference;
}

INSTANTIATE_TEST_SUITE_P(Hooks, CompressHooks, testing::Values(CommHook::fp16_compress, CommHook::bf16_compress),
                         hook_test_name);

// Ranks that send buckets in different dtypes would not pair up: the constructor says so.
TEST(CompressHooksErrors, RanksThatChooseDifferentHooksAreTold) {
  const CommHook mine = group().rank() == 1 ? CommHook::bf16_compress : CommHook::none;
  test::expect_error([&] { DistributedDataParallel ddp(make_model("mlp"), options(mine)); },
                     "the ranks chose different communication hooks: rank 0 uses allreduce_hook, rank(s) 1 a "
                     "different one");
}

// ---- GradScaler under DDP ----------------------------------------------------------------------

class AmpUnderDdp : public testing::TestWithParam<CommHook> {};

// Rank 1 alone writes an inf into one element of one gradient, after backward accumulated it and
// before DDP's all-reduce. The all-reduce carries it to every rank, so every rank's GradScaler
// finds it: all skip that step, keep their parameters and halve their scale, and the next clean
// step steps everywhere. Parameters and scales stay identical across ranks throughout.
TEST_P(AmpUnderDdp, AnInfOnOneRankMakesEveryRankSkipTheStep) {
  const int rank = group().rank(), world = group().size();
  manual_seed(41 + rank);
  std::shared_ptr<Module> model = make_model("mlp");
  const int inf_step = 1;
  int step = 0;
  // Registered before DDP's own hook on this parameter, so called before it copies the
  // gradient into its bucket.
  model->parameters().front().register_post_accumulate_grad_hook([&](const Tensor& p) {
    if (rank == 1 && step == inf_step) {
      p.grad().view({p.grad().numel()}).slice(0, 5, 6).fill_(std::numeric_limits<double>::infinity());
    }
  });
  DistributedDataParallel ddp(model, options(GetParam()));
  SGD opt(ddp.parameters(), SGDOptions(0.05).momentum(0.9));
  // Below the default 65536, so that f16-compressed scaled gradients stay finite on clean steps.
  const double init_scale = 1024;
  GradScaler scaler(GradScalerOptions().init_scale(init_scale));
  for (step = 0; step < 3; ++step) {
    const Batch b = make_batch(8, 3000 + step * world + rank);
    opt.zero_grad();
    scaler.scale(cross_entropy(ddp(b.x), b.y)).backward();
    std::vector<Tensor> before;
    for (const Tensor& p : model->parameters()) before.push_back(p.detach().clone());
    const bool stepped = scaler.step(opt);
    scaler.update();

    const bool clean = step != inf_step;
    for (const std::vector<double>& r : gather_from_all(full({1}, stepped ? 1.0 : 0.0))) {
      EXPECT_EQ(r[0], clean ? 1.0 : 0.0) << "step " << step << ": every rank " << (clean ? "steps" : "skips");
    }
    const Tensor scale = full({1}, scaler.get_scale(), TensorOptions().dtype(DType::f64));
    for (const std::vector<double>& r : gather_from_all(scale)) {
      EXPECT_EQ(r[0], step < inf_step ? init_scale : init_scale / 2) << "step " << step << ": the scale";
    }
    const auto params = model->named_parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      test::expect_same_on_every_rank(params[k].second, params[k].first + " after step " + std::to_string(step));
      const bool unchanged = params[k].second.to_vector<double>() == before[k].to_vector<double>();
      EXPECT_EQ(unchanged, !clean) << params[k].first << " after step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Hooks, AmpUnderDdp,
                         testing::Values(CommHook::none, CommHook::fp16_compress, CommHook::bf16_compress),
                         hook_test_name);

}  // namespace
}  // namespace lockstep
