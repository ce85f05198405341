// Exercise ch07_updates_per_epoch: the test of the student's updates_per_epoch, scaled_lr and
// warmup_lr (starter.cpp or the file given with FILE=...). The expected step counts come from
// the library's own DistributedSampler and DataLoader, iterated batch by batch over a small
// TensorDataset; the expected learning rates from the library's LinearLR driving an SGD
// optimiser, step by step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep.h"
#include "optim/lr_scheduler.h"
#include "updates_per_epoch.h"

namespace lockstep {
namespace {

const TensorOptions kF64 = TensorOptions().dtype(DType::f64);
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A dataset of `images` one-pixel images: only how many there are matters here.
std::shared_ptr<const Dataset> tiny_dataset(int64_t images) {
  return std::make_shared<TensorDataset>(zeros({images, 1}), zeros({images}, TensorOptions().dtype(DType::i64)));
}

/// The batches that rank `rank`'s DataLoader yields in one epoch, counted by iterating it, as a
/// training loop does: a DistributedSampler of `ranks` ranks (PyTorch's defaults: shuffled, no
/// drop_last) under a DataLoader of `batch` (no drop_last). Also checks that the loader's
/// size() (len(loader)) says the same, and that the batches hold ceil(images / ranks) images.
int64_t library_updates(const std::shared_ptr<const Dataset>& dataset, int64_t batch, int64_t ranks, int64_t rank) {
  const int64_t images = dataset->size();
  auto sampler = std::make_shared<DistributedSampler>(images, ranks, rank, DistributedSamplerOptions().seed(3));
  DataLoader loader(dataset, DataLoaderOptions(batch).sampler(sampler).prefetch(0));
  sampler->set_epoch(1);
  int64_t steps = 0, seen = 0;
  for (const Batch& b : loader) {
    ++steps;
    seen += b.targets.size(0);
  }
  const std::string where = std::to_string(images) + " images, batch " + std::to_string(batch) + ", " +
                            std::to_string(ranks) + " ranks, rank " + std::to_string(rank);
  EXPECT_EQ(loader.size(), steps) << "the library's DataLoader::size() disagrees with its own iteration: " << where;
  EXPECT_EQ(seen, (images + ranks - 1) / ranks) << "the library's shard is not ceil(images / ranks): " << where;
  return steps;
}

std::string describe(int64_t images, int64_t batch, int64_t ranks) {
  return "updates_per_epoch(" + std::to_string(images) + ", " + std::to_string(batch) + ", " + std::to_string(ranks) +
         ")";
}

double relative_error(double got, double want) {
  if (got == want) return 0.0;
  return std::fabs(got - want) / std::max(std::fabs(want), std::numeric_limits<double>::min());
}

TEST(UpdatesPerEpoch, ByHand) {
  // 10 images, batch 3, one rank: batches of 3, 3, 3 and 1; the short one is a step too.
  EXPECT_EQ(exercise::updates_per_epoch(10, 3, 1), 4);
  // Two ranks: 5 images each, batches of 3 and 2.
  EXPECT_EQ(exercise::updates_per_epoch(10, 3, 2), 2);
  // Three ranks: 10 is padded to 12 (two images repeated), 4 each: batches of 3 and 1.
  EXPECT_EQ(exercise::updates_per_epoch(10, 3, 3), 2);
  // Four ranks: padded to 12, 3 each, one full batch.
  EXPECT_EQ(exercise::updates_per_epoch(10, 3, 4), 1);
  // More ranks than images: every rank still gets one (repeated) image, and one step.
  EXPECT_EQ(exercise::updates_per_epoch(1, 64, 4), 1);
  // Exact fits: no padding, no short batch.
  EXPECT_EQ(exercise::updates_per_epoch(12, 3, 2), 2);
  EXPECT_EQ(exercise::updates_per_epoch(12, 6, 1), 2);
}

TEST(UpdatesPerEpoch, TheChaptersNumbersMatchTheLibrary) {
  // Fashion-MNIST's 60000 training images at 64 per rank: 938 steps on one device, 118 on each
  // of 8 ranks. The effective batch 8 x 64 = 512 takes about 8 times fewer steps per epoch,
  // which is why it is behind after one epoch. And 5120 images at 256 on 2 ranks: 10.
  struct Case {
    int64_t images, batch, ranks, want;
  };
  for (const Case& c : {Case{60000, 64, 1, 938}, Case{60000, 64, 8, 118}, Case{5120, 256, 2, 10},
                        Case{60000, 512, 1, 118}, Case{60000, 64, 2, 469}}) {
    EXPECT_EQ(exercise::updates_per_epoch(c.images, c.batch, c.ranks), c.want) << describe(c.images, c.batch, c.ranks);
    EXPECT_EQ(library_updates(tiny_dataset(c.images), c.batch, c.ranks, 0), c.want)
        << "the library, for " << describe(c.images, c.batch, c.ranks);
  }
}

TEST(UpdatesPerEpoch, MatchesTheLibrarysSamplerAndLoader) {
  // Every combination of 1 to 300 images (step 7), batch 1 to 40 and 1 to 5 ranks: the count
  // rank 0's DataLoader yields, iterated. Every other rank yields the same count (the sampler
  // pads so that no rank waits for an all-reduce that never comes): checked for each rank.
  int64_t compared = 0;
  for (int64_t images = 1; images <= 300; images += 7) {
    const std::shared_ptr<const Dataset> dataset = tiny_dataset(images);
    for (int64_t ranks = 1; ranks <= 5; ++ranks) {
      for (int64_t batch = 1; batch <= 40; ++batch) {
        const int64_t want = library_updates(dataset, batch, ranks, 0);
        for (int64_t rank = 1; rank < ranks; ++rank)
          ASSERT_EQ(library_updates(dataset, batch, ranks, rank), want) << "rank " << rank << " of " << ranks;
        ASSERT_EQ(exercise::updates_per_epoch(images, batch, ranks), want)
            << describe(images, batch, ranks) << ": the library's DataLoader yields " << want << " batches on rank 0";
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 43 * 5 * 40);
}

TEST(UpdatesPerEpoch, LargeCountsStayExact) {
  // 2^53 + 1 images: a double cannot hold it, so a ceil through doubles is off by one here.
  const int64_t images = (int64_t{1} << 53) + 1;
  EXPECT_EQ(exercise::updates_per_epoch(images, 1, 1), images);
  EXPECT_EQ(exercise::updates_per_epoch(images, 2, 1), (int64_t{1} << 52) + 1);
}

TEST(UpdatesPerEpoch, InvalidArgumentsThrow) {
  EXPECT_THROW(exercise::updates_per_epoch(0, 64, 1), std::invalid_argument) << "no images";
  EXPECT_THROW(exercise::updates_per_epoch(-5, 64, 1), std::invalid_argument);
  EXPECT_THROW(exercise::updates_per_epoch(100, 0, 1), std::invalid_argument) << "batch 0";
  EXPECT_THROW(exercise::updates_per_epoch(100, -64, 1), std::invalid_argument);
  EXPECT_THROW(exercise::updates_per_epoch(100, 64, 0), std::invalid_argument) << "no ranks";
  EXPECT_THROW(exercise::updates_per_epoch(100, 64, -2), std::invalid_argument);
}

TEST(ScaledLr, TheLinearScalingRule) {
  // The chapter: 0.05 tuned for 64 images per step; 8 ranks of 64 make 512: 0.4.
  EXPECT_LE(relative_error(exercise::scaled_lr(0.05, 64, 512), 0.4), 1e-15) << exercise::scaled_lr(0.05, 64, 512);
  // Goyal et al.: 0.1 per 256 images, 8192 images per step: 3.2.
  EXPECT_LE(relative_error(exercise::scaled_lr(0.1, 256, 8192), 3.2), 1e-15) << exercise::scaled_lr(0.1, 256, 8192);
  // The same batch keeps the rate; a smaller one scales it down; a factor that is not a power of 2.
  EXPECT_EQ(exercise::scaled_lr(0.05, 64, 64), 0.05);
  EXPECT_LE(relative_error(exercise::scaled_lr(0.4, 512, 64), 0.05), 1e-15) << exercise::scaled_lr(0.4, 512, 64);
  EXPECT_LE(relative_error(exercise::scaled_lr(0.05, 64, 192), 0.15), 1e-15) << exercise::scaled_lr(0.05, 64, 192);
}

TEST(ScaledLr, InvalidArgumentsThrow) {
  EXPECT_THROW(exercise::scaled_lr(0.0, 64, 512), std::invalid_argument) << "lr 0";
  EXPECT_THROW(exercise::scaled_lr(-0.05, 64, 512), std::invalid_argument);
  EXPECT_THROW(exercise::scaled_lr(kNaN, 64, 512), std::invalid_argument) << "lr NaN";
  EXPECT_THROW(exercise::scaled_lr(0.05, 0, 512), std::invalid_argument) << "base batch 0";
  EXPECT_THROW(exercise::scaled_lr(0.05, -64, 512), std::invalid_argument);
  EXPECT_THROW(exercise::scaled_lr(0.05, 64, 0), std::invalid_argument) << "effective batch 0";
  EXPECT_THROW(exercise::scaled_lr(0.05, 64, -512), std::invalid_argument);
}

TEST(WarmupLr, ByHand) {
  // 0.05 to 0.4 over 10 steps: 0.035 more each step, then 0.4 for good.
  const std::vector<double> want = {0.05, 0.085, 0.12, 0.155, 0.19, 0.225, 0.26, 0.295, 0.33, 0.365, 0.4, 0.4, 0.4};
  for (size_t t = 0; t < want.size(); ++t)
    EXPECT_LE(relative_error(exercise::warmup_lr(static_cast<int64_t>(t), 0.05, 0.4, 10), want[t]), 1e-12)
        << "step " << t << ": " << exercise::warmup_lr(static_cast<int64_t>(t), 0.05, 0.4, 10);
  // Far past the warm-up the rate stays the target.
  EXPECT_LE(relative_error(exercise::warmup_lr(1000000, 0.05, 0.4, 10), 0.4), 1e-12);
}

TEST(WarmupLr, MatchesTheLibrarysLinearLR) {
  // The training loop of chapter 6's --warmup-epochs: the optimiser holds the target rate,
  // LinearLR starts it at base / target of it, and steps once per optimiser step. Before each
  // optimizer.step() the optimiser's lr is the rate that step uses: warmup_lr must give it.
  struct Case {
    double base, target;
    int64_t warmup;
  };
  for (const Case& c : {Case{0.05, 0.4, 10}, Case{0.05, 0.4, 118}, Case{0.1, 3.2, 25}, Case{0.05 / 3, 0.05, 5},
                        Case{0.01, 0.01, 3}, Case{0.001, 0.3, 1}}) {
    SCOPED_TRACE("from " + std::to_string(c.base) + " to " + std::to_string(c.target) + " over " +
                 std::to_string(c.warmup) + " steps");
    const Tensor param = zeros({1}, kF64).requires_grad_(true);
    SGD optimizer({param}, SGDOptions(c.target));
    LinearLR warmup(optimizer, c.base / c.target, 1.0, c.warmup);
    for (int64_t t = 0; t < c.warmup + 5; ++t) {
      const double lib = optimizer.lr();
      const double got = exercise::warmup_lr(t, c.base, c.target, c.warmup);
      ASSERT_LE(relative_error(got, lib), 1e-12) << "step " << t << ": warmup_lr gives " << got << ", LinearLR " << lib;
      param.set_grad(ones({1}, kF64));
      optimizer.step();
      warmup.step();
    }
  }
}

TEST(WarmupLr, TheChaptersScheduleOnEightRanks) {
  // Together: 8 ranks of 64 images, one epoch of warm-up from the one-device rate to the scaled
  // one. 118 steps per epoch; 0.05 at step 0, 0.4 from step 118 on, halfway at step 59.
  const int64_t steps = exercise::updates_per_epoch(60000, 64, 8);
  const double target = exercise::scaled_lr(0.05, 64, 8 * 64);
  EXPECT_EQ(steps, 118);
  EXPECT_LE(relative_error(exercise::warmup_lr(0, 0.05, target, steps), 0.05), 1e-12);
  EXPECT_LE(relative_error(exercise::warmup_lr(59, 0.05, target, steps), 0.225), 1e-12);
  EXPECT_LE(relative_error(exercise::warmup_lr(118, 0.05, target, steps), 0.4), 1e-12);
  EXPECT_LE(relative_error(exercise::warmup_lr(119, 0.05, target, steps), 0.4), 1e-12);
}

TEST(WarmupLr, InvalidArgumentsThrow) {
  EXPECT_THROW(exercise::warmup_lr(-1, 0.05, 0.4, 10), std::invalid_argument) << "step -1";
  EXPECT_THROW(exercise::warmup_lr(0, 0.05, 0.4, 0), std::invalid_argument) << "no warm-up steps";
  EXPECT_THROW(exercise::warmup_lr(0, 0.05, 0.4, -10), std::invalid_argument);
  EXPECT_THROW(exercise::warmup_lr(0, 0.0, 0.4, 10), std::invalid_argument) << "base lr 0";
  EXPECT_THROW(exercise::warmup_lr(0, -0.05, 0.4, 10), std::invalid_argument);
  EXPECT_THROW(exercise::warmup_lr(0, 0.05, 0.0, 10), std::invalid_argument) << "target lr 0";
  EXPECT_THROW(exercise::warmup_lr(0, 0.05, -0.4, 10), std::invalid_argument);
  EXPECT_THROW(exercise::warmup_lr(0, kNaN, 0.4, 10), std::invalid_argument) << "base lr NaN";
}

}  // namespace
}  // namespace lockstep
