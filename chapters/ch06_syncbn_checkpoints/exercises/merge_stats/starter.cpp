// Exercise ch06_merge_stats: your file. Merge per-rank batch statistics into the statistics of
// all the ranks' values, as SyncBatchNorm does. Build and test it with:
//   make exercise EX=ch06_merge_stats
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep.h"
#include "merge_stats.h"  // ChannelStats and the two declarations (README: a copy kept elsewhere)

namespace exercise {

using namespace lockstep;

ChannelStats merge_stats(const std::vector<ChannelStats>& ranks) {
  // TODO: return the mean, the biased variance and the total count of the union of the ranks'
  // values, merging one rank at a time into a running (n, mean, M2), M2 = var * n:
  //     delta = mean_b - mean_a,  n = n_a + n_b,
  //     mean  = mean_a + delta * n_b / n,
  //     M2    = M2_a + M2_b + delta^2 * n_a * n_b / n.
  //   - do not sum count * (var + mean^2) and subtract the mean squared: with means near 1e8
  //     that loses every digit of a small variance (the README says why);
  //   - skip a rank with count 0: its mean may be NaN. With no values at all, return {0, 0, 0};
  //   - a negative count throws std::invalid_argument;
  //   - compute in double: n_a * n_b overflows int64 for a few billion values on each side.
  (void)ranks;
  throw Error("merge_stats: not written yet (write the TODO in starter.cpp)");
}

double unbiased(const ChannelStats& stats) {
  // TODO: var * n / (n - 1), the variance SyncBatchNorm puts into running_var; throw
  // std::invalid_argument when count <= 1.
  (void)stats;
  throw Error("unbiased: not written yet (write the TODO in starter.cpp)");
}

}  // namespace exercise
