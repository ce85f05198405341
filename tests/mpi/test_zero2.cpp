// ZeRO-2 on 2 and 3 ranks: DistributedDataParallel with shard_gradients(true) and
// Zero2Optimizer train chapter 2's CNN as DDP with a plain optimiser does, with several
// buckets: each rank's gradient shards are its shards of DDP's averaged gradients, and the
// weights after SGD with momentum and after Adam those of the plain run; after backward no rank
// holds a whole gradient; the options it does not combine with, and a shard asked of a DDP that
// does not shard, are errors. (The averages are compared to rounding, not bitwise: with 3 ranks
// MPI's reduce-scatter and all-reduce may add the ranks' shares in different orders.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::group;

OptimizerFactory optimizer(const std::string& name) {
  if (name == "adam") {
    return [](std::vector<Tensor> p) { return std::make_unique<Adam>(std::move(p), AdamOptions(0.01)); };
  }
  return [](std::vector<Tensor> p) { return std::make_unique<SGD>(std::move(p), SGDOptions(0.05).momentum(0.9)); };
}

// A bucket's parameters' gradients end to end, as the Reducer lays them out.
Tensor flat_grads(const std::vector<Tensor>& params) {
  std::vector<Tensor> pieces;
  for (const Tensor& p : params) pieces.push_back(p.grad().reshape({p.numel()}));
  return cat(pieces, 0);
}

void expect_close(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t k = 0; k < g.size(); ++k) ASSERT_NEAR(g[k], w[k], rel * (1 + std::abs(w[k]))) << what << ", element " << k;
}

// Small buckets, so that the CNN's gradients travel in several (20 KiB caps).
DistributedDataParallelOptions small_buckets() {
  return DistributedDataParallelOptions().bucket_cap_mb(0.02).first_bucket_cap_mb(0.01);
}

// Rank `rank`'s batch of step `step`: 8 images and labels.
std::pair<Tensor, Tensor> batch(int step, int rank, int world) {
  Generator gen(3000 + step * world + rank);
  std::vector<int64_t> labels(8);
  for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
  return {randn({8, 1, 28, 28}, {}, &gen), from_vector(labels, {8})};
}

class Zero2Steps : public testing::TestWithParam<std::string> {};

TEST_P(Zero2Steps, TrainsAsDdpWithAPlainOptimizerAndKeepsOnlyShards) {
  const int rank = group().rank(), world = group().size();
  manual_seed(21);
  auto sharded = std::make_shared<DistributedDataParallel>(make_model("cnn"), small_buckets().shard_gradients(true));
  manual_seed(21);
  auto plain = std::make_shared<DistributedDataParallel>(make_model("cnn"), small_buckets());
  ASSERT_GT(sharded->buckets().size(), 2u) << "the test needs several buckets";
  Zero2Optimizer zero2(*sharded, optimizer(GetParam()));
  const std::unique_ptr<Optimizer> reference = optimizer(GetParam())(plain->parameters());
  const std::vector<Tensor> plain_params = plain->parameters(), sharded_params = sharded->parameters();
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = batch(step, rank, world);
    zero2.zero_grad();
    reference->zero_grad();
    cross_entropy((*sharded)(x), y).backward();
    cross_entropy((*plain)(x), y).backward();
    // Only shards remain: no parameter holds a whole gradient, and each bucket's shard is this
    // rank's shard of the averages DDP hands the plain copy.
    for (const Tensor& p : sharded_params) ASSERT_FALSE(p.grad().defined()) << "step " << step;
    const std::vector<GradientShard> shards = sharded->gradient_shards();
    size_t first = 0;
    for (const GradientShard& shard : shards) {
      ASSERT_EQ(shard.shard.numel(), shard_numel(shard.numel, world));
      // The plain model's parameters of this bucket: the same positions in parameters().
      std::vector<Tensor> same;
      for (const Tensor& p : shard.params) {
        for (size_t i = 0; i < sharded_params.size(); ++i) {
          if (sharded_params[i].storage() == p.storage()) same.push_back(plain_params[i]);
        }
      }
      ASSERT_EQ(same.size(), shard.params.size());
      expect_close(shard.shard, shard_of(flat_grads(same), rank, world), 1e-6,
                   "step " + std::to_string(step) + ", gradient shard of bucket " + std::to_string(first++));
    }
    zero2.step();
    reference->step();
  }
  const std::vector<Tensor>& got = sharded_params;
  // SGD is linear in the gradient, so rounding stays rounding; Adam divides by the gradient's
  // root mean square, which magnifies a rounding of a gradient near zero up to the step size.
  const double rel = GetParam() == "adam" ? 1e-4 : 1e-6;
  for (size_t i = 0; i < plain_params.size(); ++i) {
    expect_close(got[i], plain_params[i], rel, "parameter " + std::to_string(i));
    test::expect_same_on_every_rank(got[i], "parameter " + std::to_string(i) + " under ZeRO-2");
  }
  // The optimiser's state is sharded too: its parameters, this rank's parts, hold a world-th of
  // the elements (plus at most one per bucket, where a shard is rounded up), and share the
  // model's memory: no master copy.
  int64_t held = 0, whole = 0;
  for (const Tensor& part : zero2.parts()) {
    held += part.numel();
    const bool shares = std::any_of(sharded_params.begin(), sharded_params.end(),
                                    [&](const Tensor& p) { return p.storage() == part.storage(); });
    EXPECT_TRUE(shares) << "a part that is not a view of a parameter";
  }
  for (const Tensor& p : plain_params) whole += p.numel();
  EXPECT_LE(held, whole / world + static_cast<int64_t>(sharded->gradient_shards().size()));
  EXPECT_EQ(zero2.optimizer().params().size(), zero2.parts().size());
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Zero2Steps, testing::Values("sgd", "adam"));

TEST(Zero2, ErrorsSayWhatIsWrong) {
  using test::expect_error;
  expect_error([] {
    DistributedDataParallel ddp(make_model("cnn"),
                                DistributedDataParallelOptions().shard_gradients(true).find_unused_parameters(true));
  }, "shard_gradients (ZeRO-2) does not combine with find_unused_parameters");
  DistributedDataParallel ddp(make_model("cnn"));
  expect_error([&] { (void)ddp.gradient_shards(); }, "gradient shards exist only with shard_gradients(true)");
  // Ranks that disagree would start different collectives for the same bucket: the constructor
  // says so on every rank.
  const bool mine = group().rank() == 1;
  expect_error([&] { DistributedDataParallel d(make_model("mlp"), DistributedDataParallelOptions().shard_gradients(mine)); },
               "rank 0 does not shard its gradients, rank(s) 1 do");
}

}  // namespace
}  // namespace lockstep
