// The MPI backend's collectives: exact results for f32, f64 and i64, for sizes 0, 1, odd, and
// larger than DDP's first bucket; asynchronous works waited for out of order; errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::group;

// Rank r's value at element i: distinct per rank and element, exactly representable, and for
// i64 beyond 2^53 so that a detour through double would show.
double value(DType dtype, int rank, int64_t i) {
  if (dtype == DType::i64) return static_cast<double>((int64_t{1} << 40) * (rank + 1) + i % 1000);
  return static_cast<double>((rank + 1) * (i % 7 - 3));
}

Tensor rank_tensor(DType dtype, int64_t n, int rank) {
  std::vector<int64_t> ints(n);
  std::vector<double> reals(n);
  for (int64_t i = 0; i < n; ++i) {
    reals[i] = value(dtype, rank, i);
    ints[i] = static_cast<int64_t>(reals[i]);
  }
  if (dtype == DType::i64) return from_vector(ints, {n});
  return from_vector(reals, {n}, TensorOptions().dtype(dtype));
}

// i64 values compared as integers, the rest as doubles (all exact here).
std::vector<int64_t> as_ints(const Tensor& t) { return t.to(DType::i64).to_vector<int64_t>(); }

struct Case {
  DType dtype;
  int64_t n;
};

class Collectives : public testing::TestWithParam<Case> {};

TEST_P(Collectives, AllReduceSumMaxAvg) {
  const auto [dtype, n] = GetParam();
  const int world = group().size();
  const Tensor sum = rank_tensor(dtype, n, group().rank());
  const Tensor max = rank_tensor(dtype, n, group().rank());
  group().all_reduce(sum, ReduceOp::Sum);
  group().all_reduce(max, ReduceOp::Max);
  EXPECT_EQ(sum.version(), 1) << "a collective changes its tensor in place, and counts it";
  const std::vector<int64_t> got_sum = as_ints(sum), got_max = as_ints(max);
  for (int64_t i = 0; i < n; ++i) {
    int64_t want_sum = 0, want_max = INT64_MIN;
    for (int r = 0; r < world; ++r) {
      want_sum += static_cast<int64_t>(value(dtype, r, i));
      want_max = std::max(want_max, static_cast<int64_t>(value(dtype, r, i)));
    }
    ASSERT_EQ(got_sum[i], want_sum) << "sum, element " << i;
    ASSERT_EQ(got_max[i], want_max) << "max, element " << i;
  }
  if (dtype == DType::i64) return;  // Avg is for floating dtypes (tested as an error below)
  const Tensor avg = rank_tensor(dtype, n, group().rank());
  group().all_reduce(avg, ReduceOp::Avg);
  const std::vector<double> got_avg = avg.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < world; ++r) want += value(dtype, r, i);
    ASSERT_NEAR(got_avg[i], want / world, 1e-6 * std::abs(want)) << "avg, element " << i;
  }
}

TEST_P(Collectives, BroadcastFromTheLastRank) {
  const auto [dtype, n] = GetParam();
  const int root = group().size() - 1;
  const Tensor t = rank_tensor(dtype, n, group().rank());
  group().broadcast(t, root);
  EXPECT_EQ(as_ints(t), as_ints(rank_tensor(dtype, n, root)));
}

TEST_P(Collectives, AllGatherPutsRanksInOrder) {
  const auto [dtype, n] = GetParam();
  const int world = group().size();
  const Tensor out = zeros({world * n}, TensorOptions().dtype(dtype));
  group().all_gather(out, rank_tensor(dtype, n, group().rank()));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(as_ints(out.slice(0, r * n, (r + 1) * n)), as_ints(rank_tensor(dtype, n, r))) << "slice of rank " << r;
  }
}

TEST_P(Collectives, ReduceScatterGivesEachRankItsSlice) {
  const auto [dtype, n] = GetParam();
  const int world = group().size();
  const int me = group().rank();
  const Tensor out = zeros({n}, TensorOptions().dtype(dtype));
  group().reduce_scatter(out, rank_tensor(dtype, world * n, me), ReduceOp::Sum);
  std::vector<int64_t> want(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < world; ++r) want[i] += static_cast<int64_t>(value(dtype, r, me * n + i));
  }
  EXPECT_EQ(as_ints(out), want);
}

// f32 of 2^20 + 3 elements is 4 MiB: more than DDP's first bucket (1 MiB).
INSTANTIATE_TEST_SUITE_P(DTypesAndSizes, Collectives,
                         testing::Values(Case{DType::f32, 0}, Case{DType::f32, 1}, Case{DType::f32, 7},
                                         Case{DType::f32, (1 << 20) + 3}, Case{DType::f64, 0}, Case{DType::f64, 1},
                                         Case{DType::f64, 7}, Case{DType::f64, (1 << 18) + 5}, Case{DType::i64, 0},
                                         Case{DType::i64, 1}, Case{DType::i64, 7}, Case{DType::i64, (1 << 18) + 5}));

TEST(CollectivesAsync, WorksMayBeWaitedForInAnyOrder) {
  const int world = group().size();
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 4; ++k) {
    tensors.push_back(full({1000}, k + 1.0));
    works.push_back(group().all_reduce_async(tensors.back()));
  }
  for (int k = 3; k >= 0; --k) {
    works[k]->wait();
    EXPECT_TRUE(works[k]->is_completed());
    EXPECT_EQ(tensors[k].to_vector<double>().back(), (k + 1.0) * world);
  }
  works[0]->wait();  // waiting twice is harmless
  group().barrier();
}

TEST(CollectivesErrors, SayWhatIsWrong) {
  using test::expect_error;
  expect_error([] { group().all_reduce(zeros({4, 4}).t()); }, "all_reduce: expected a contiguous input tensor");
  expect_error([] { group().all_reduce(zeros({2}, TensorOptions().dtype(DType::i64)), ReduceOp::Avg); },
               "ReduceOp::Avg needs a floating dtype, got i64");
  expect_error([] { group().broadcast(zeros({2}), group().size()); }, "broadcast: expected a root rank in [0, ");
  expect_error([] { group().all_gather(zeros({3}), zeros({2})); }, "times the elements of the smaller");
  expect_error([] { group().all_reduce(zeros({2}, TensorOptions().dtype(DType::boolean))); },
               "the MPI backend cannot send bool tensors");
}

}  // namespace
}  // namespace lockstep
