// Mixed precision under DistributedDataParallel: the compression hooks (gradients sent in f16 or
// bf16).
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace lockstep
