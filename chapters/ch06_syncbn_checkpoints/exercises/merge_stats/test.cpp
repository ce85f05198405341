// Exercise ch06_merge_stats: the test of the student's merge_stats and unbiased (starter.cpp or
// the file given with FILE=...). The expected statistics come from explicit samples, split
// unevenly across 1 to 5 "ranks": each rank's (mean, biased var, count) is computed from its own
// samples, and the student's merge of them must match a two-pass computation over all the
// samples together, done here in long double. The library's SyncBatchNorm is compared last.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep.h"
#include "merge_stats.h"

namespace lockstep {
namespace {

using exercise::ChannelStats;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string describe(const ChannelStats& s) {
  std::ostringstream out;
  out.precision(17);
  out << "{mean " << s.mean << ", var " << s.var << ", count " << s.count << "}";
  return out.str();
}

std::string describe(const std::vector<ChannelStats>& ranks) {
  std::string out = "ranks [";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + describe(ranks[i]);
  return out + "]";
}

/// The statistics of `xs` by two passes (the mean, then the squared deviations from it), in long
/// double. A rank with no samples gets what 0/0 gives, NaN, as a rank that divides by its
/// count would send: merge_stats must not let it through.
ChannelStats two_pass(const std::vector<double>& xs) {
  if (xs.empty()) return ChannelStats{kNaN, kNaN, 0};
  long double sum = 0;
  for (double x : xs) sum += x;
  const long double mean = sum / xs.size();
  long double m2 = 0;
  for (double x : xs) m2 += (x - mean) * (x - mean);
  return ChannelStats{static_cast<double>(mean), static_cast<double>(m2 / xs.size()), static_cast<int64_t>(xs.size())};
}

/// Cuts `xs` into consecutive ranks of the given sizes (which add up to xs.size()) and returns
/// each rank's statistics.
std::vector<ChannelStats> split(const std::vector<double>& xs, const std::vector<size_t>& sizes) {
  std::vector<ChannelStats> ranks;
  size_t start = 0;
  for (size_t n : sizes) {
    ranks.push_back(two_pass(std::vector<double>(xs.begin() + start, xs.begin() + start + n)));
    start += n;
  }
  EXPECT_EQ(start, xs.size()) << "the test's split does not cover the samples";
  return ranks;
}

std::vector<double> samples(size_t n, double mean, double sd, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(mean, sd);
  std::vector<double> xs(n);
  for (double& x : xs) x = normal(rng);
  return xs;
}

double relative_error(double got, double want) {
  if (got == want) return 0.0;
  return std::fabs(got - want) / std::max(std::fabs(want), std::numeric_limits<double>::min());
}

/// merge_stats(ranks) against `want`: the count exactly, the mean and the variance to relative
/// tolerances.
void expect_merge(const std::vector<ChannelStats>& ranks, const ChannelStats& want, double mean_tol, double var_tol) {
  const ChannelStats got = exercise::merge_stats(ranks);
  const std::string where = "merge_stats(" + describe(ranks) + ") = " + describe(got) + ", expected " + describe(want);
  EXPECT_EQ(got.count, want.count) << where;
  EXPECT_LE(relative_error(got.mean, want.mean), mean_tol) << "the mean: " << where;
  EXPECT_LE(relative_error(got.var, want.var), var_tol) << "the variance: " << where;
}

TEST(MergeStats, TwoRanksByHand) {
  // {1} and {3}: one value each, variance 0 each; together mean 2 and (1 + 1) / 2 = 1.
  expect_merge({{1.0, 0.0, 1}, {3.0, 0.0, 1}}, {2.0, 1.0, 2}, 1e-15, 1e-15);
  // {-1, 1} (mean 0, var 1) and {2, 4, 6} (mean 4, var 8/3): the union {-1, 1, 2, 4, 6} has
  // mean 12/5 = 2.4 and variance 58/5 - 2.4^2 = 5.84. By Chan: delta = 4, n = 5,
  // mean = 0 + 4 * 3/5, M2 = 2 + 8 + 16 * 2 * 3 / 5 = 29.2, var = 29.2 / 5.
  expect_merge({{0.0, 1.0, 2}, {4.0, 8.0 / 3.0, 3}}, {2.4, 5.84, 5}, 1e-15, 1e-14);
  // The variance is not the mean of the variances: two ranks with variance 0 and different
  // means have the spread between them.
  expect_merge({{-2.0, 0.0, 10}, {2.0, 0.0, 10}}, {0.0, 4.0, 20}, 1e-15, 1e-15);
}

TEST(MergeStats, UnevenSplitsMatchTwoPass) {
  // 1000 samples, split across 1 to 5 ranks, unevenly and with empty ranks, as a batch the
  // ranks do not divide (chapter 3) or a last batch smaller than the world leaves them.
  const std::vector<std::vector<size_t>> splits = {
      {1000}, {1, 999}, {500, 0, 500}, {10, 300, 0, 77, 613}, {0, 0, 998, 1, 1}, {250, 250, 250, 250}, {999, 0, 1}};
  for (unsigned seed : {1u, 2u, 3u}) {
    const std::vector<double> xs = samples(1000, seed == 3 ? -40.0 : 3.0, seed == 2 ? 0.01 : 2.0, seed);
    const ChannelStats want = two_pass(xs);
    for (const auto& sizes : splits) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(sizes.size()) + " ranks");
      expect_merge(split(xs, sizes), want, 1e-12, 1e-10);
    }
  }
}

TEST(MergeStats, EmptyRanksAddNothing) {
  // A rank with count 0 adds nothing, whatever its mean and var hold: NaN (0/0), 0 or garbage,
  // first, in the middle or last.
  const std::vector<double> xs = samples(40, 5.0, 3.0, 7);
  const ChannelStats want = two_pass(xs);
  const std::vector<ChannelStats> full = split(xs, {15, 25});
  for (const ChannelStats& empty : {ChannelStats{kNaN, kNaN, 0}, ChannelStats{0.0, 0.0, 0}, ChannelStats{1e300, -5.0, 0}}) {
    expect_merge({empty, full[0], full[1]}, want, 1e-13, 1e-12);
    expect_merge({full[0], empty, full[1]}, want, 1e-13, 1e-12);
    expect_merge({full[0], full[1], empty, empty}, want, 1e-13, 1e-12);
  }
}

TEST(MergeStats, NoValuesGivesZeros) {
  // No ranks, or only empty ones: nothing to take a mean of, and the convention is {0, 0, 0}
  // (the library's SyncBatchNorm refuses a total of 1 or fewer before it gets here).
  for (const std::vector<ChannelStats>& ranks : {std::vector<ChannelStats>{}, std::vector<ChannelStats>{{kNaN, kNaN, 0}},
                                                 std::vector<ChannelStats>{{0.0, 0.0, 0}, {kNaN, kNaN, 0}, {3.0, 1.0, 0}}}) {
    const ChannelStats got = exercise::merge_stats(ranks);
    EXPECT_TRUE(got.mean == 0.0 && got.var == 0.0 && got.count == 0)
        << "merge_stats(" << describe(ranks) << ") = " << describe(got) << ", expected {0, 0, 0}";
  }
}

TEST(MergeStats, OneRankIsItself) {
  for (const ChannelStats& one : {ChannelStats{5.5, 2.25, 7}, ChannelStats{-3.0, 0.0, 1}, ChannelStats{1e8, 1e-6, 12345}}) {
    const ChannelStats got = exercise::merge_stats({one});
    EXPECT_EQ(got.count, one.count);
    EXPECT_DOUBLE_EQ(got.mean, one.mean) << describe(got);
    EXPECT_DOUBLE_EQ(got.var, one.var) << describe(got);
  }
}

TEST(MergeStats, LargeMeanSmallVariance) {
  // Values near 1e8 with spread 1, as an unnormalised input (pixel sums, timestamps) gives the
  // first BatchNorm. mean^2 is 1e16, where doubles are 2 apart, so the naive
  // E[x^2] - E[x]^2 = sum(n * (var + mean^2)) / n - mean^2 loses every digit of a variance of 1.
  // Chan's merge squares only the differences of the means, and keeps it to about 1e-8.
  const std::vector<double> xs = samples(10000, 1e8, 1.0, 11);
  const ChannelStats want = two_pass(xs);
  for (const auto& sizes : std::vector<std::vector<size_t>>{{3333, 0, 4000, 1, 2666}, {5000, 5000}, {1, 2, 3, 4, 9990}}) {
    const std::vector<ChannelStats> ranks = split(xs, sizes);

    // The test's own check: the naive formula fails here, so this case tells the two apart.
    double n = 0, sum = 0, sum_sq = 0;
    for (const ChannelStats& r : ranks) {
      if (r.count == 0) continue;
      n += r.count;
      sum += r.count * r.mean;
      sum_sq += r.count * (r.var + r.mean * r.mean);
    }
    const double naive_var = sum_sq / n - (sum / n) * (sum / n);
    ASSERT_GT(relative_error(naive_var, want.var), 1e-3)
        << "the test's data no longer defeats the naive formula: " << naive_var << " against " << want.var;

    SCOPED_TRACE(std::to_string(sizes.size()) + " ranks; the naive formula gives var " + std::to_string(naive_var));
    expect_merge(ranks, want, 1e-13, 1e-6);
  }
}

TEST(MergeStats, TheOrderOfTheRanksDoesNotMatter) {
  // The union is the same set whatever the order the ranks arrive in; the merge may round
  // differently, but only in the last digits. Every order of 5 ranks, one of them empty.
  const std::vector<double> xs = samples(600, -7.0, 4.0, 13);
  std::vector<ChannelStats> ranks = split(xs, {100, 0, 37, 400, 63});
  const ChannelStats first = exercise::merge_stats(ranks);
  std::sort(ranks.begin(), ranks.end(), [](const ChannelStats& a, const ChannelStats& b) { return a.count < b.count; });
  int orders = 0;
  do {
    ++orders;
    const ChannelStats got = exercise::merge_stats(ranks);
    EXPECT_EQ(got.count, first.count) << describe(ranks);
    EXPECT_LE(relative_error(got.mean, first.mean), 1e-12) << describe(ranks) << " gives " << describe(got) << ", another order " << describe(first);
    EXPECT_LE(relative_error(got.var, first.var), 1e-12) << describe(ranks) << " gives " << describe(got) << ", another order " << describe(first);
  } while (std::next_permutation(ranks.begin(), ranks.end(),
                                 [](const ChannelStats& a, const ChannelStats& b) { return a.count < b.count; }));
  EXPECT_EQ(orders, 120);
  expect_merge(ranks, two_pass(xs), 1e-12, 1e-10);
}

TEST(MergeStats, LargeCountsDoNotOverflow) {
  // 5e9 values on each of two ranks (ten billion pixels of one channel over a long run of
  // accumulation is not absurd): n_a * n_b = 2.5e19 is past int64's 9.2e18. Means 0 and 2,
  // variance 1 each: the union has mean 1 and variance 1 + 1 (within plus between).
  const int64_t big = 5000000000;
  expect_merge({{0.0, 1.0, big}, {2.0, 1.0, big}}, {1.0, 2.0, 2 * big}, 1e-15, 1e-15);
  expect_merge({{0.0, 1.0, big}, {0.0, 0.0, 0}, {2.0, 1.0, big}, {1.0, 0.0, 1}}, {1.0, 2.0 * 2 * big / (2 * big + 1), 2 * big + 1},
               1e-15, 1e-15);
}

TEST(MergeStats, ANegativeCountThrows) {
  EXPECT_THROW(exercise::merge_stats({{0.0, 1.0, -1}}), std::invalid_argument);
  EXPECT_THROW(exercise::merge_stats({{0.0, 1.0, 4}, {1.0, 1.0, -3}}), std::invalid_argument);
}

TEST(Unbiased, DividesByNMinusOne) {
  EXPECT_DOUBLE_EQ(exercise::unbiased({2.4, 5.84, 5}), 5.84 * 5 / 4) << "{-1, 1, 2, 4, 6}: 29.2 / 4";
  EXPECT_DOUBLE_EQ(exercise::unbiased({2.0, 1.0, 2}), 2.0) << "{1, 3}: ((1 - 2)^2 + (3 - 2)^2) / 1";
  EXPECT_DOUBLE_EQ(exercise::unbiased({0.0, 0.0, 9}), 0.0);
  // What SyncBatchNorm puts into running_var: the merged statistics' unbiased variance is the
  // sum of squared deviations over all the samples, divided by n - 1.
  const std::vector<double> xs = samples(300, 1.5, 0.5, 17);
  long double sum = 0, m2 = 0;
  for (double x : xs) sum += x;
  for (double x : xs) m2 += (x - sum / xs.size()) * (x - sum / xs.size());
  const double got = exercise::unbiased(exercise::merge_stats(split(xs, {120, 0, 180})));
  EXPECT_LE(relative_error(got, static_cast<double>(m2 / (xs.size() - 1))), 1e-10) << got;
}

TEST(Unbiased, ThrowsForOneValueOrFewer) {
  // One value has no spread to estimate: n / (n - 1) would divide by zero. The convention here
  // is std::invalid_argument, for 1, 0 and negative counts alike.
  EXPECT_THROW(exercise::unbiased({3.0, 0.0, 1}), std::invalid_argument);
  EXPECT_THROW(exercise::unbiased({0.0, 0.0, 0}), std::invalid_argument);
  EXPECT_THROW(exercise::unbiased({0.0, 0.0, -2}), std::invalid_argument);
}

TEST(MergeStats, AgreesWithTheLibrary) {
  // lockstep's sync_batch_norm (src/tensor/ops/batch_norm.h) all-gathers every rank's row
  // [means | variances | count] and merges them. Given these rows by a fake all-gather, with
  // momentum 1 its running_mean and running_var become the merged mean and the unbiased merged
  // variance: the student's functions should give the same, per channel.
  const std::vector<std::vector<size_t>> splits = {{30, 0, 70}, {1, 99, 0, 0}, {50, 50}};
  const int64_t C = 3;
  const TensorOptions f64 = TensorOptions().dtype(DType::f64);
  for (const auto& sizes : splits) {
    const int64_t R = static_cast<int64_t>(sizes.size());
    std::vector<double> rows(static_cast<size_t>(R * (2 * C + 1)));
    std::vector<std::vector<ChannelStats>> per_channel(C);
    for (int64_t c = 0; c < C; ++c) {
      const std::vector<double> xs = samples(100, c == 2 ? 1e6 : 2.0 * c, 1.0 + c, static_cast<unsigned>(20 + c));
      per_channel[c] = split(xs, sizes);
      for (int64_t r = 0; r < R; ++r) {
        const ChannelStats& s = per_channel[c][r];
        rows[r * (2 * C + 1) + c] = s.count ? s.mean : 0.0;  // the library's rows hold 0 for an empty rank
        rows[r * (2 * C + 1) + C + c] = s.count ? s.var : 0.0;
        rows[r * (2 * C + 1) + 2 * C] = static_cast<double>(s.count);
      }
    }
    const Tensor gathered = from_vector(rows, {R, 2 * C + 1}, f64);
    BatchNormCollectives collectives;
    collectives.all_gather = [&](const Tensor&) { return gathered.clone(); };
    collectives.all_reduce_sum = [](const Tensor&) {};
    const Tensor running_mean = zeros({C}, f64), running_var = ones({C}, f64);
    sync_batch_norm(zeros({2, C, 1, 1}, f64), running_mean, running_var, ones({C}, f64), zeros({C}, f64), 1.0, 1e-5,
                    collectives);
    const std::vector<double> lib_mean = running_mean.to_vector<double>(), lib_var = running_var.to_vector<double>();
    for (int64_t c = 0; c < C; ++c) {
      const ChannelStats got = exercise::merge_stats(per_channel[c]);
      EXPECT_LE(relative_error(got.mean, lib_mean[c]), 1e-12) << "channel " << c << ": " << describe(got) << ", library mean " << lib_mean[c];
      EXPECT_LE(relative_error(exercise::unbiased(got), lib_var[c]), 1e-9)
          << "channel " << c << ": unbiased " << exercise::unbiased(got) << ", library running_var " << lib_var[c];
    }
  }
}

}  // namespace
}  // namespace lockstep
