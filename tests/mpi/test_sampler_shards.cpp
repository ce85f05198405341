// DistributedSampler across real ranks: each rank builds its own sampler from its rank alone,
// and the shards, gathered, must tile the dataset as PyTorch's DistributedSampler's do.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "mpi_test_util.h"

namespace lockstep {
namespace {

using test::group;

// Every rank's shard of epoch `epoch`, gathered: result[r] is rank r's.
std::vector<std::vector<int64_t>> shards(int64_t n, const DistributedSamplerOptions& options, int64_t epoch) {
  DistributedSampler sampler(n, group().size(), group().rank(), options);
  sampler.set_epoch(epoch);
  const std::vector<int64_t> mine = sampler.indices();
  const auto gathered = test::gather_from_all(from_vector(mine, {static_cast<int64_t>(mine.size())}));
  std::vector<std::vector<int64_t>> out;
  for (const auto& values : gathered) out.emplace_back(values.begin(), values.end());
  return out;
}

TEST(SamplerShards, CoverTheDatasetAndOverlapOnlyByThePadding) {
  const int world = group().size();
  for (const int64_t n : {int64_t{10}, int64_t{11}, int64_t{12}, int64_t{1}}) {
    for (const bool shuffle : {true, false}) {
      const auto all = shards(n, DistributedSamplerOptions().shuffle(shuffle).seed(5), 0);
      std::map<int64_t, int> seen;
      for (const auto& shard : all) {
        EXPECT_EQ(shard.size(), all[0].size()) << "every rank runs the same number of steps";
        for (int64_t i : shard) ++seen[i];
      }
      // Every sample at least once; repeats only as many as the padding adds.
      const int64_t total = static_cast<int64_t>(all[0].size()) * world;
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "n " << n;
      int64_t repeats = 0;
      for (const auto& [index, count] : seen) repeats += count - 1;
      EXPECT_EQ(repeats, total - n) << "n " << n;
    }
  }
}

TEST(SamplerShards, DropLastGivesDisjointShards) {
  const int world = group().size();
  const auto all = shards(11, DistributedSamplerOptions().drop_last(true), 0);
  std::vector<int64_t> joined;
  for (const auto& shard : all) joined.insert(joined.end(), shard.begin(), shard.end());
  std::sort(joined.begin(), joined.end());
  EXPECT_EQ(std::adjacent_find(joined.begin(), joined.end()), joined.end()) << "an index on two ranks";
  EXPECT_EQ(static_cast<int64_t>(joined.size()), 11 / world * world);
}

TEST(SamplerShards, SetEpochReshufflesTheSameWayOnEveryRun) {
  const auto epoch0 = shards(100, DistributedSamplerOptions().seed(3), 0);
  const auto epoch1 = shards(100, DistributedSamplerOptions().seed(3), 1);
  EXPECT_NE(epoch0, epoch1) << "set_epoch did not change the order";
  EXPECT_EQ(shards(100, DistributedSamplerOptions().seed(3), 1), epoch1) << "same seed and epoch, different order";
}

}  // namespace
}  // namespace lockstep
