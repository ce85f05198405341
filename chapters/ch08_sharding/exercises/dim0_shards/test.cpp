// Exercise ch08_dim0_shards: the test of the student's shard_dim0 and unshard_dim0 (starter.cpp
// or the file given with FILE=...). Every expected value is written here element by element from
// the rule (rank r holds rows r*R to r*R + R - 1, R = ceil(rows / world), zeros past the end);
// the last test checks the layout against the library's own fully_shard rules: the shards of
// shard_of (distributed/flat_shard.h) for a 1-D tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep.h"

namespace exercise {
/// Rank `rank`'s dim-0 shard of `whole` over `world` ranks, padded with zero rows.
lockstep::Tensor shard_dim0(const lockstep::Tensor& whole, int rank, int world);
/// The whole tensor of shape `whole_shape` from every rank's shard, padding dropped.
lockstep::Tensor unshard_dim0(const std::vector<lockstep::Tensor>& shards, const lockstep::Shape& whole_shape);
}  // namespace exercise

namespace lockstep {
namespace {

// 0, 1, 2, ... as f32 in `shape`: every element tells where it came from.
Tensor counting(const Shape& shape) {
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i + 1);
  return from_vector(values, shape);
}

void expect_shard(const Shape& shape, int world) {
  const Tensor whole = counting(shape);
  const int64_t rows = shape.empty() ? 1 : shape[0], inner = whole.numel() / rows;
  const int64_t per = (rows + world - 1) / world;
  for (int rank = 0; rank < world; ++rank) {
    const Tensor shard = exercise::shard_dim0(whole, rank, world);
    const std::string what = shape_str(shape) + " over " + std::to_string(world) + " ranks, rank " + std::to_string(rank);
    ASSERT_EQ(shard.size(0), per) << what << ": R = ceil(rows / world) rows";
    ASSERT_EQ(shard.numel(), per * inner) << what;
    for (int64_t d = 1; d < static_cast<int64_t>(shape.size()); ++d) ASSERT_EQ(shard.size(d), shape[d]) << what;
    const std::vector<float> got = shard.contiguous().reshape({shard.numel()}).to_vector<float>();
    for (int64_t r = 0; r < per; ++r) {
      for (int64_t c = 0; c < inner; ++c) {
        const int64_t row = rank * per + r;
        const float want = row < rows ? static_cast<float>(row * inner + c + 1) : 0.0f;
        ASSERT_EQ(got[static_cast<size_t>(r * inner + c)], want) << what << ", row " << r << " column " << c;
      }
    }
  }
}

TEST(Dim0Shards, EvenRowsSplitWithoutPadding) {
  expect_shard({6, 4}, 2);
  expect_shard({6, 4}, 3);
  expect_shard({8}, 4);
}

TEST(Dim0Shards, UnevenRowsArePaddedWithZeros) {
  expect_shard({7, 3}, 2);   // R = 4: rank 1 has 3 rows and one of padding
  expect_shard({10}, 3);     // a bias: R = 4, rank 2 holds 2 real rows
  expect_shard({5, 2, 3, 3}, 4);  // a convolution weight: rows are output channels
}

TEST(Dim0Shards, FewerRowsThanRanks) {
  expect_shard({2, 5}, 3);  // rank 2 holds only padding
  expect_shard({1}, 4);
  expect_shard({}, 2);      // a 0-dim parameter is one row
}

TEST(Dim0Shards, TheShardIsACopy) {
  const Tensor whole = counting({4, 2});
  const Tensor shard = exercise::shard_dim0(whole, 1, 2);
  shard.fill_(-1.0);
  EXPECT_EQ(whole.to_vector<float>(), counting({4, 2}).to_vector<float>()) << "changing a shard changed the whole";
}

TEST(Dim0Shards, UnshardGivesTheWholeBack) {
  for (const Shape& shape : std::vector<Shape>{{6, 4}, {7, 3}, {10}, {2, 5}, {5, 2, 3, 3}, {1}}) {
    for (int world = 1; world <= 4; ++world) {
      const Tensor whole = counting(shape);
      std::vector<Tensor> shards;
      for (int rank = 0; rank < world; ++rank) shards.push_back(exercise::shard_dim0(whole, rank, world));
      const Tensor back = exercise::unshard_dim0(shards, shape);
      ASSERT_EQ(back.shape(), shape) << shape_str(shape) << " over " << world;
      ASSERT_EQ(back.to_vector<float>(), whole.to_vector<float>()) << shape_str(shape) << " over " << world;
    }
  }
}

// For a 1-D tensor, dim-0 shards are the library's flat shards (distributed/flat_shard.h).
TEST(Dim0Shards, OneDimensionalShardsAreTheLibrarysFlatShards) {
  const Tensor whole = counting({11});
  for (int world = 1; world <= 4; ++world) {
    for (int rank = 0; rank < world; ++rank) {
      EXPECT_EQ(exercise::shard_dim0(whole, rank, world).to_vector<float>(), shard_of(whole, rank, world).to_vector<float>())
          << "rank " << rank << " of " << world;
    }
  }
}

}  // namespace
}  // namespace lockstep
