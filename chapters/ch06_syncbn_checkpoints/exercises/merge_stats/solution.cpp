// Exercise ch06_merge_stats: the reference solution.
#include <stdexcept>
#include <string>
#include <vector>

#include "merge_stats.h"

namespace exercise {

ChannelStats merge_stats(const std::vector<ChannelStats>& ranks) {
  // The running union so far, as (n, mean, M2) with M2 = var * n, the sum of squared deviations.
  // Counts are doubles here: n_a * n_b overflows int64 past about 3e9 values on each side.
  double n = 0.0, mean = 0.0, m2 = 0.0;
  int64_t total = 0;
  for (const ChannelStats& r : ranks) {
    if (r.count < 0) throw std::invalid_argument("merge_stats: negative count " + std::to_string(r.count));
    // An empty rank adds nothing. Skipping it matters: its mean may be NaN (0/0), and
    // NaN * 0 is still NaN; and while the union is empty too, n_b / n would be 0/0.
    if (r.count == 0) continue;
    const double nb = static_cast<double>(r.count);
    const double n_ab = n + nb, delta = r.mean - mean;
    // Chan et al.: only the difference of the means is squared, never the values themselves,
    // so nothing of the size of mean^2 is subtracted and no digits cancel.
    mean += delta * (nb / n_ab);
    m2 += r.var * nb + delta * delta * (n * nb / n_ab);
    n = n_ab;
    total += r.count;
  }
  if (total == 0) return ChannelStats{0.0, 0.0, 0};
  return ChannelStats{mean, m2 / n, total};
}

double unbiased(const ChannelStats& stats) {
  if (stats.count <= 1)
    throw std::invalid_argument("unbiased: the unbiased variance needs at least 2 values, got " +
                                std::to_string(stats.count));
  const double n = static_cast<double>(stats.count);
  return stats.var * (n / (n - 1.0));
}

}  // namespace exercise
