// DistributedSampler: shard sizes, coverage and padding, interleaving, seeding by seed + epoch,
// agreement with a literal transcription of PyTorch's algorithm, and argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

using Indices = std::vector<int64_t>;

// The indices of every rank for one epoch, shard r at position r.
std::vector<Indices> all_shards(int64_t n, int64_t replicas, const DistributedSamplerOptions& options,
                                int64_t epoch = 0) {
  std::vector<Indices> shards;
  for (int64_t rank = 0; rank < replicas; ++rank) {
    DistributedSampler sampler(n, replicas, rank, options);
    sampler.set_epoch(epoch);
    shards.push_back(sampler.indices());
  }
  return shards;
}

Indices concat(const std::vector<Indices>& shards) {
  Indices all;
  for (const Indices& shard : shards) all.insert(all.end(), shard.begin(), shard.end());
  return all;
}

Indices sorted(Indices values) {
  std::sort(values.begin(), values.end());
  return values;
}

Indices iota(int64_t n) {
  Indices values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), int64_t(0));
  return values;
}

// The order before padding: what every rank starts from.
Indices base_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  if (!shuffle) return iota(n);
  Generator generator(seed + static_cast<uint64_t>(epoch));
  return randperm(n, generator);
}

// PyTorch's DistributedSampler.__iter__, transcribed step by step (list concatenation and
// slicing), as an independent check of the wrap-around arithmetic in the implementation.
Indices torch_shard(int64_t n, int64_t replicas, int64_t rank, bool shuffle, uint64_t seed, int64_t epoch,
                    bool drop_last) {
  const double r = static_cast<double>(replicas);
  const int64_t num_samples = static_cast<int64_t>((drop_last && n % replicas != 0) ? std::ceil((n - replicas) / r)
                                                                                     : std::ceil(n / r));
  const int64_t total_size = num_samples * replicas;
  Indices indices = base_order(n, shuffle, seed, epoch);
  if (!drop_last) {
    const int64_t padding_size = total_size - static_cast<int64_t>(indices.size());
    if (padding_size <= static_cast<int64_t>(indices.size())) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + padding_size);
    } else {
      // indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
      const int64_t copies = (padding_size + n - 1) / n;
      Indices repeated;
      for (int64_t c = 0; c < copies; ++c) repeated.insert(repeated.end(), indices.begin(), indices.end());
      indices.insert(indices.end(), repeated.begin(), repeated.begin() + padding_size);
    }
  } else {
    indices.resize(static_cast<size_t>(total_size));
  }
  Indices shard;
  for (int64_t i = rank; i < total_size; i += replicas) shard.push_back(indices[static_cast<size_t>(i)]);
  return shard;
}

struct SizeCase {
  int64_t n, replicas;
  bool drop_last;
  int64_t num_samples, total_size;
};

}  // namespace

TEST(DistributedSampler, DefaultOptionsArePyTorchs) {
  const DistributedSamplerOptions defaults;
  EXPECT_TRUE(defaults.shuffle());
  EXPECT_EQ(defaults.seed(), 0u);
  EXPECT_FALSE(defaults.drop_last());
  const DistributedSamplerOptions chained = DistributedSamplerOptions().shuffle(false).seed(42).drop_last(true);
  EXPECT_FALSE(chained.shuffle());
  EXPECT_EQ(chained.seed(), 42u);
  EXPECT_TRUE(chained.drop_last());

  DistributedSampler sampler(10, 3, 2);
  EXPECT_EQ(sampler.num_replicas(), 3);
  EXPECT_EQ(sampler.rank(), 2);
  EXPECT_EQ(sampler.epoch(), 0);
  sampler.set_epoch(5);
  EXPECT_EQ(sampler.epoch(), 5);
}

TEST(DistributedSampler, SizesRoundUpOrDownWithDropLast) {
  const std::vector<SizeCase> cases = {
      {10, 3, false, 4, 12}, {10, 3, true, 3, 9},  // uneven: pad up to 12 or cut down to 9
      {12, 3, false, 4, 12}, {12, 3, true, 4, 12},  // even: drop_last changes nothing
      {0, 3, false, 0, 0},   {0, 3, true, 0, 0},    // empty dataset
      {2, 3, false, 1, 3},   {2, 3, true, 0, 0},    // fewer samples than ranks
      {1, 4, false, 1, 4},   {1, 4, true, 0, 0},    // padding longer than the dataset
      {7, 1, false, 7, 7},   {7, 1, true, 7, 7},    // one rank gets everything
  };
  for (const SizeCase& c : cases) {
    for (int64_t rank = 0; rank < c.replicas; ++rank) {
      DistributedSampler sampler(c.n, c.replicas, rank, DistributedSamplerOptions().drop_last(c.drop_last));
      SCOPED_TRACE(testing::Message() << "N=" << c.n << " R=" << c.replicas << " drop_last=" << c.drop_last
                                      << " rank=" << rank);
      EXPECT_EQ(sampler.num_samples(), c.num_samples);
      EXPECT_EQ(sampler.size(), c.num_samples);
      EXPECT_EQ(sampler.total_size(), c.total_size);
      EXPECT_EQ(static_cast<int64_t>(sampler.indices().size()), c.num_samples);
    }
  }
}

TEST(DistributedSampler, EveryRankYieldsExactlySizeIndices) {
  for (int64_t n = 0; n <= 13; ++n) {
    for (int64_t replicas = 1; replicas <= 5; ++replicas) {
      for (bool drop_last : {false, true}) {
        for (bool shuffle : {false, true}) {
          const auto options = DistributedSamplerOptions().shuffle(shuffle).drop_last(drop_last).seed(3);
          for (int64_t rank = 0; rank < replicas; ++rank) {
            DistributedSampler sampler(n, replicas, rank, options);
            sampler.set_epoch(1);
            EXPECT_EQ(static_cast<int64_t>(sampler.indices().size()), sampler.size())
                << "N=" << n << " R=" << replicas << " rank=" << rank << " drop_last=" << drop_last
                << " shuffle=" << shuffle;
          }
        }
      }
    }
  }
}

TEST(DistributedSampler, UnionOfRanksCoversTheDataset) {
  for (int64_t n : {1, 2, 9, 10, 12, 100}) {
    for (int64_t replicas : {1, 3, 4, 7}) {
      for (bool shuffle : {false, true}) {
        const Indices all = concat(all_shards(n, replicas, DistributedSamplerOptions().shuffle(shuffle).seed(11), 2));
        const std::set<int64_t> distinct(all.begin(), all.end());
        EXPECT_EQ(Indices(distinct.begin(), distinct.end()), iota(n)) << "N=" << n << " R=" << replicas;
      }
    }
  }
}

TEST(DistributedSampler, PaddingRepeatsTheStartOfTheOrder) {
  // {N, R}: padding shorter than N, longer than N (repeated list), and N < R.
  const std::vector<std::pair<int64_t, int64_t>> cases = {{10, 3}, {5, 4}, {2, 3}, {1, 4}, {2, 7}};
  for (const auto& [n, replicas] : cases) {
    const auto options = DistributedSamplerOptions().seed(8);
    const std::vector<Indices> shards = all_shards(n, replicas, options, 4);
    const Indices order = base_order(n, true, 8, 4);
    const int64_t total_size = DistributedSampler(n, replicas, 0, options).total_size();
    Indices expected = order;
    for (int64_t i = 0; i < total_size - n; ++i) expected.push_back(order[static_cast<size_t>(i % n)]);
    EXPECT_EQ(sorted(concat(shards)), sorted(expected)) << "N=" << n << " R=" << replicas;
  }
}

TEST(DistributedSampler, ShardsAreDisjointWhenTheDatasetDividesEvenly) {
  const std::vector<Indices> shards = all_shards(12, 4, DistributedSamplerOptions().seed(1));
  const Indices all = concat(shards);
  EXPECT_EQ(sorted(all), iota(12));  // 12 indices, each once
}

TEST(DistributedSampler, DropLastGivesDisjointShardsOfTotalSizeDistinctIndices) {
  for (bool shuffle : {false, true}) {
    const auto options = DistributedSamplerOptions().drop_last(true).shuffle(shuffle);
    const Indices all = concat(all_shards(10, 3, options));
    const std::set<int64_t> distinct(all.begin(), all.end());
    EXPECT_EQ(all.size(), 9u);
    EXPECT_EQ(distinct.size(), 9u);  // no index twice: nothing was padded
    for (int64_t i : all) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, 10);
    }
    // The dropped index is the last of the order.
    const Indices order = base_order(10, shuffle, 0, 0);
    EXPECT_EQ(distinct.count(order.back()), 0u);
  }
}

TEST(DistributedSampler, RanksTakeInterleavedPositionsWithoutShuffle) {
  const auto options = DistributedSamplerOptions().shuffle(false);
  const std::vector<Indices> shards = all_shards(10, 3, options);
  EXPECT_EQ(shards[0], (Indices{0, 3, 6, 9}));
  EXPECT_EQ(shards[1], (Indices{1, 4, 7, 0}));  // padded positions 10, 11 wrap to 0, 1
  EXPECT_EQ(shards[2], (Indices{2, 5, 8, 1}));

  const std::vector<Indices> dropped = all_shards(10, 3, DistributedSamplerOptions(options).drop_last(true));
  EXPECT_EQ(dropped[0], (Indices{0, 3, 6}));
  EXPECT_EQ(dropped[1], (Indices{1, 4, 7}));
  EXPECT_EQ(dropped[2], (Indices{2, 5, 8}));

  // Padding three times longer than the dataset: the one sample goes to every rank.
  const std::vector<Indices> single = all_shards(1, 4, options);
  for (const Indices& shard : single) EXPECT_EQ(shard, (Indices{0}));

  // Padding longer than the dataset, repeated: positions 2..6 are 0, 1, 0, 1, 0.
  const std::vector<Indices> tiny = all_shards(2, 7, options);
  EXPECT_EQ(concat(tiny), (Indices{0, 1, 0, 1, 0, 1, 0}));
}

TEST(DistributedSampler, MatchesPyTorchsAlgorithm) {
  for (int64_t n : {0, 1, 2, 5, 10, 12, 17}) {
    for (int64_t replicas : {1, 2, 3, 4, 6}) {
      for (bool drop_last : {false, true}) {
        for (bool shuffle : {false, true}) {
          const auto options = DistributedSamplerOptions().shuffle(shuffle).drop_last(drop_last).seed(21);
          for (int64_t rank = 0; rank < replicas; ++rank) {
            DistributedSampler sampler(n, replicas, rank, options);
            sampler.set_epoch(3);
            EXPECT_EQ(sampler.indices(), torch_shard(n, replicas, rank, shuffle, 21, 3, drop_last))
                << "N=" << n << " R=" << replicas << " rank=" << rank << " drop_last=" << drop_last
                << " shuffle=" << shuffle;
          }
        }
      }
    }
  }
}

TEST(DistributedSampler, SameSeedAndEpochGiveSameShards) {
  const auto options = DistributedSamplerOptions().seed(123);
  for (int64_t rank = 0; rank < 4; ++rank) {
    DistributedSampler a(50, 4, rank, options);
    DistributedSampler b(50, 4, rank, options);
    a.set_epoch(7);
    b.set_epoch(7);
    EXPECT_EQ(a.indices(), b.indices()) << "rank " << rank;
  }
}

TEST(DistributedSampler, SetEpochChangesTheOrder) {
  DistributedSampler sampler(100, 1, 0);
  std::set<Indices> orders;
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    sampler.set_epoch(epoch);
    const Indices order = sampler.indices();
    EXPECT_EQ(sorted(order), iota(100));  // still a permutation
    orders.insert(order);
  }
  EXPECT_EQ(orders.size(), 5u);  // five epochs, five different permutations
}

TEST(DistributedSampler, ForgettingSetEpochRepeatsTheOrder) {
  DistributedSampler sampler(100, 2, 1, DistributedSamplerOptions().seed(9));
  const Indices first = sampler.indices();
  const Indices second = sampler.indices();
  EXPECT_EQ(first, second);
  EXPECT_EQ(sampler.epoch(), 0);
}

TEST(DistributedSampler, DifferentSeedsGiveDifferentOrders) {
  DistributedSampler a(100, 1, 0, DistributedSamplerOptions().seed(1));
  DistributedSampler b(100, 1, 0, DistributedSamplerOptions().seed(2));
  EXPECT_NE(a.indices(), b.indices());
}

TEST(DistributedSampler, WithoutShuffleTheEpochDoesNotMatter) {
  DistributedSampler sampler(10, 3, 1, DistributedSamplerOptions().shuffle(false));
  const Indices first = sampler.indices();
  sampler.set_epoch(4);
  EXPECT_EQ(sampler.indices(), first);
}

TEST(DistributedSampler, AllRanksShareOnePermutation) {
  // {N, R}: even (the re-interleaved shards are exactly the one-rank order) and uneven (its
  // first N entries are, the rest is padding).
  for (const auto& [n, replicas] : std::vector<std::pair<int64_t, int64_t>>{{12, 4}, {100, 5}, {10, 3}}) {
    const auto options = DistributedSamplerOptions().seed(5);
    const std::vector<Indices> shards = all_shards(n, replicas, options, 3);
    DistributedSampler whole(n, 1, 0, options);
    whole.set_epoch(3);
    const Indices one_rank = whole.indices();

    Indices interleaved;
    for (size_t k = 0; k < shards[0].size(); ++k) {
      for (const Indices& shard : shards) interleaved.push_back(shard[k]);
    }
    interleaved.resize(static_cast<size_t>(n));
    EXPECT_EQ(interleaved, one_rank) << "N=" << n << " R=" << replicas;
  }
}

TEST(DistributedSampler, DrivesADataLoader) {
  const int64_t n = 10;
  Indices targets = iota(n);
  auto dataset = std::make_shared<TensorDataset>(zeros({n, 1}), from_vector(targets, {n}));
  auto sampler = std::make_shared<DistributedSampler>(n, 3, 1, DistributedSamplerOptions().seed(4));
  DataLoader loader(dataset, DataLoaderOptions(3).sampler(sampler).prefetch(0));
  EXPECT_EQ(loader.size(), 2);  // 4 samples per rank in batches of 3

  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.sampler().set_epoch(epoch);  // reaches the DistributedSampler through Sampler&
    Indices seen;
    for (const Batch& batch : loader) {
      for (int64_t t : batch.targets.to_vector<int64_t>()) seen.push_back(t);
    }
    EXPECT_EQ(sampler->epoch(), epoch);
    EXPECT_EQ(seen, torch_shard(n, 3, 1, true, 4, epoch, false)) << "epoch " << epoch;
  }
}

TEST(DistributedSampler, EmptyDatasetGivesEmptyShards) {
  for (bool drop_last : {false, true}) {
    DistributedSampler sampler(0, 2, 1, DistributedSamplerOptions().drop_last(drop_last));
    EXPECT_EQ(sampler.size(), 0);
    EXPECT_TRUE(sampler.indices().empty());
  }
}

TEST(DistributedSampler, RejectsInvalidArguments) {
  expect_error([] { DistributedSampler(10, 0, 0); }, "DistributedSampler: expected num_replicas >= 1");
  expect_error([] { DistributedSampler(10, -2, 0); }, "got -2");
  expect_error([] { DistributedSampler(10, 4, 4); }, "expected a rank in [0, num_replicas) = [0, 4), got rank 4");
  expect_error([] { DistributedSampler(10, 4, -1); }, "got rank -1");
  expect_error([] { DistributedSampler(-1, 4, 0); }, "DistributedSampler: expected a dataset size >= 0, got -1");
  DistributedSampler sampler(10, 2, 0);
  expect_error([&] { sampler.set_epoch(-1); }, "DistributedSampler: expected an epoch >= 0, got -1");
  EXPECT_EQ(sampler.epoch(), 0);  // a rejected epoch is not stored
}

// A job interrupted after some steps and resumed at another world size (chapter 8's sharded
// checkpoints keep the position as a global sample count): every sample of the interrupted
// epoch is trained exactly once, counted over every rank of both jobs, for 2 -> 3, 3 -> 2 and
// 2 -> 1 ranks on 60 samples (which every world size here divides).
TEST(DistributedSampler, ResumedAtAnotherWorldSizeEverySampleOnce) {
  const int64_t size = 60, batch = 4, steps = 3, epoch = 1;
  for (const auto& [before, after] : std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {3, 2}, {2, 1}}) {
    std::vector<int> seen(size, 0);
    for (int64_t rank = 0; rank < before; ++rank) {
      DistributedSampler sampler(size, before, rank, DistributedSamplerOptions().seed(7));
      sampler.set_epoch(epoch);
      const std::vector<int64_t> mine = sampler.indices();
      for (int64_t i = 0; i < steps * batch; ++i) ++seen[mine[i]];  // the steps done before
    }
    for (int64_t rank = 0; rank < after; ++rank) {
      DistributedSampler sampler(size, after, rank, DistributedSamplerOptions().seed(7));
      sampler.resume_at(epoch, steps * batch * before);  // ShardedResumeInfo::samples_in_epoch
      for (int64_t index : sampler.indices()) ++seen[index];
    }
    for (int64_t i = 0; i < size; ++i) {
      ASSERT_EQ(seen[i], 1) << "sample " << i << ", " << before << " -> " << after << " ranks";
    }
  }
}
