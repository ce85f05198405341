// Exercise ch06_merge_stats: the two functions the student writes, declared for test.cpp and
// for the student's file (a file kept elsewhere, FILE=..., needs a copy of this header beside it).
#pragma once

#include <cstdint>
#include <vector>

namespace exercise {

/// One channel's batch statistics on one rank: the mean and the biased variance (divided by
/// count) of its `count` values. A rank with count 0 has no values, and its mean and var mean
/// nothing (they may be 0/0 = NaN).
struct ChannelStats {
  double mean = 0.0;  ///< the mean of the values
  double var = 0.0;   ///< the biased variance: the sum of (x - mean)^2, divided by count
  int64_t count = 0;  ///< how many values
};

/// The statistics of the union of all the ranks' values: its mean, its biased variance and its
/// total count, merged pairwise with Chan et al.'s update. Ranks with count 0 add nothing; with
/// no values at all (no ranks, or only empty ones) the result is {0, 0, 0}. A negative count
/// throws std::invalid_argument.
ChannelStats merge_stats(const std::vector<ChannelStats>& ranks);

/// The unbiased variance var * n / (n - 1), what SyncBatchNorm puts into running_var. Throws
/// std::invalid_argument when count <= 1, where it is not defined.
double unbiased(const ChannelStats& stats);

}  // namespace exercise
