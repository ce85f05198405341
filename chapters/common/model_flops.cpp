// The peak a rank's throughput is measured against, and the arithmetic of MFU.
#include "common/model_flops.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/cuda/context.h"
#include "core/flop_count.h"
#include "tensor/ops/cpu/peak_flops.h"
#include "tensor/ops/matmul.h"
#include "tensor/tensor.h"
#include "util/timer.h"

namespace lockstep {
namespace {

// The rate of a square matmul of side n in `dtype` on the GPU `device`: the best of five after
// one to warm up (cuBLAS picks its algorithm on the first call).
double gpu_matmul_rate(Device device, DType dtype) {
  constexpr int64_t n = 4096;
  const TensorOptions options = TensorOptions().device(device).dtype(dtype);
  const Tensor a = randn({n, n}, options), b = randn({n, n}, options);
  matmul(a, b);
  cuda::synchronize(device);
  double best = 0.0;
  for (int run = 0; run < 5; ++run) {
    Timer timer;
    matmul(a, b);
    cuda::synchronize(device);
    best = std::max(best, 2.0 * n * n * n / timer.seconds());
  }
  return best;
}

}  // namespace

double rank_peak_flops(Device device, DType dtype, int threads) {
  if (!device.is_cuda()) return cpu::core_peak_flops(dtype) * threads;
  static std::map<std::pair<int, DType>, double> measured;
  auto [at, fresh] = measured.try_emplace({device.index(), dtype}, 0.0);
  if (fresh) at->second = gpu_matmul_rate(device, dtype);
  return at->second;
}

void TrainingFlops::start() { started_at_ = flops_counted(); }

int64_t TrainingFlops::stop() {
  const int64_t flops = flops_counted() - started_at_;
  total_ += flops;
  return flops;
}

ModelFlops model_flops(int64_t flops, int64_t samples, double samples_per_s, double peak_flops) {
  ModelFlops result;
  if (flops <= 0 || samples <= 0) return result;
  const double per_sample = static_cast<double>(flops) / static_cast<double>(samples);
  result.per_sample = std::llround(per_sample);
  if (peak_flops > 0.0) result.mfu = per_sample * samples_per_s / peak_flops;
  return result;
}

}  // namespace lockstep
