/// \file
/// SyncBatchNorm's merge of the ranks' batch statistics into one channel's mean and variance
/// (Chan, Golub and LeVeque's pairwise update), written once for the CPU kernel
/// (cpu::batch_norm_gather_stats_kernel) and the CUDA kernel (cuda::batch_norm_gather_stats_kernel),
/// so that the two compute the same operations in the same order and give the same bits.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace lockstep {

/// One channel's statistics over the batches of all ranks, in double.
struct MergedChannelStats {
  double mean;          ///< the mean of every rank's values
  double var;           ///< the biased variance (divided by the count): what normalisation uses
  double unbiased_var;  ///< the unbiased variance (divided by count - 1): what the running variance tracks
};

/// Merges channel `c` of the R ranks' rows `rows` (R, 2C + 1), row r being rank r's
/// [mean (C) | biased variance (C) | count] as batch_norm_local_stats_kernel packs it. The rows
/// are taken in rank order, each merged into the running (n, mean, M2), M2 = n * var, by
///   delta = mean_b - mean_a,  n = n_a + n_b,
///   mean = mean_a + delta * n_b / n,  M2 = M2_a + M2_b + delta^2 * n_a * n_b / n.
/// Unlike summing x and x^2 over the ranks, this subtracts no large squares from each other. A
/// row of count 0 adds nothing; with no values at all the mean and both variances are 0, with
/// one value the unbiased variance is 0.
LOCKSTEP_HOST_DEVICE MergedChannelStats merge_channel_stats(const double* rows, int64_t R, int64_t C, int64_t c) {
  const int64_t width = 2 * C + 1;
  double n = 0.0, mu = 0.0, m2 = 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const double nb = rows[r * width + 2 * C];
    if (nb <= 0.0) continue;  // an empty batch adds nothing
    const double mb = rows[r * width + c], m2b = rows[r * width + C + c] * nb;
    const double total = n + nb, delta = mb - mu;
    mu += delta * (nb / total);
    m2 += m2b + delta * delta * (n * nb / total);
    n = total;
  }
  return {mu, n > 0.0 ? m2 / n : 0.0, n > 1.0 ? m2 / (n - 1.0) : 0.0};
}

}  // namespace lockstep
