// Flat shards on 2 and 3 ranks (src/distributed/flat_shard.h): lengths the world size does not
// divide, empty and one-element tensors, every dtype the optimisers and autocast use; the
// shards of a tensor joined again are the tensor; all_gather_shards and
// reduce_scatter_to_shard against sums worked out on each rank; the errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::group;

// Rank r's element i: small whole numbers, exact in every dtype here, different per rank.
double value(int rank, int64_t i) { return static_cast<double>((rank + 1) * (i % 7 - 3)); }

Tensor rank_flat(DType dtype, int64_t n, int rank) {
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = value(rank, i);
  return from_vector(values, {n}, TensorOptions().dtype(dtype));
}

std::vector<double> as_doubles(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }

struct Case {
  DType dtype;
  int64_t n;
};

class FlatShards : public testing::TestWithParam<Case> {};

TEST_P(FlatShards, ShardsJoinedAgainAreTheTensorThenZeros) {
  const auto [dtype, n] = GetParam();
  const int world = group().size();
  const int64_t size = shard_numel(n, world);
  EXPECT_EQ(size * world >= n && size * world < n + world, true) << "padding is less than one element per rank";
  const Tensor flat = rank_flat(dtype, n, 0);
  std::vector<double> joined;
  for (int r = 0; r < world; ++r) {
    const Tensor shard = shard_of(flat, r, world);
    ASSERT_EQ(shard.numel(), size);
    EXPECT_EQ(shard.dtype(), dtype);
    for (double v : as_doubles(shard)) joined.push_back(v);
  }
  std::vector<double> want = as_doubles(flat);
  want.resize(static_cast<size_t>(size * world), 0.0);
  EXPECT_EQ(joined, want);
}

TEST_P(FlatShards, AllGatherOfTheShardsIsTheWholeTensor) {
  const auto [dtype, n] = GetParam();
  const int world = group().size(), me = group().rank();
  // Every rank holds the same tensor, and contributes its own shard of it.
  const Tensor flat = rank_flat(dtype, n, 0);
  const Tensor whole = all_gather_shards(group(), shard_of(flat, me, world), n);
  ASSERT_EQ(whole.numel(), n);
  EXPECT_EQ(whole.dtype(), dtype);
  EXPECT_EQ(as_doubles(whole), as_doubles(flat));
}

TEST_P(FlatShards, ReduceScatterGivesThisRanksShardOfTheSumAndAverage) {
  const auto [dtype, n] = GetParam();
  const int world = group().size(), me = group().rank();
  const int64_t size = shard_numel(n, world);
  const Tensor sum = reduce_scatter_to_shard(group(), rank_flat(dtype, n, me), ReduceOp::Sum);
  const Tensor avg = reduce_scatter_to_shard(group(), rank_flat(dtype, n, me), ReduceOp::Avg);
  ASSERT_EQ(sum.numel(), size);
  ASSERT_EQ(avg.numel(), size);
  const std::vector<double> got_sum = as_doubles(sum), got_avg = as_doubles(avg);
  for (int64_t k = 0; k < size; ++k) {
    const int64_t i = me * size + k;
    double want = 0;
    if (i < n) {
      for (int r = 0; r < world; ++r) want += value(r, i);
    }
    ASSERT_EQ(got_sum[static_cast<size_t>(k)], want) << "sum, element " << i;
    ASSERT_EQ(got_avg[static_cast<size_t>(k)], want / world) << "average, element " << i;
  }
}

// 7 and 1001 elements: neither 2 nor 3 divides them; 1 element: one rank's shard is all padding
// on 2 ranks, and on 3 two are.
INSTANTIATE_TEST_SUITE_P(DTypesAndLengths, FlatShards,
                         testing::Values(Case{DType::f32, 0}, Case{DType::f32, 1}, Case{DType::f32, 7},
                                         Case{DType::f32, 1001}, Case{DType::f64, 7}, Case{DType::f16, 7},
                                         Case{DType::f16, 1001}, Case{DType::bf16, 7}, Case{DType::bf16, 1001}));

TEST(FlatShardErrors, SayWhatIsWrong) {
  using test::expect_error;
  expect_error([] { (void)shard_of(zeros({2, 3}), 0, 2); }, "shard_of: expected a flat (1-D) tensor, got shape [2, 3]");
  expect_error([] { (void)shard_of(zeros({6}), 2, 2); }, "shard_of: rank 2 is not a rank of a world of 2");
  expect_error([] { (void)shard_numel(6, 0); }, "expected a world size of 1 or more, got 0");
  expect_error([] { (void)all_gather_shards(group(), zeros({1000}), 7); },
               "all_gather_shards: a shard of a tensor of 7 elements over");
  expect_error([] { (void)reduce_scatter_to_shard(group(), zeros({7}), ReduceOp::Max); },
               "expected ReduceOp::Sum or ReduceOp::Avg");
}

}  // namespace
}  // namespace lockstep
