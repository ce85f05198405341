/// \file
/// Benchmark of the CUDA elementwise kernels against the memory bandwidth the GPU delivers:
/// add(a, b) of f32 tensors on cuda:0 timed next to a device-to-device copy of the same tensor
/// (cuda::copy_between_devices, a cudaMemcpyAsync), for 2^20 to 2^26 elements.
///
/// How to read it: add reads a and b and writes the sum, 3 * N * 4 bytes; the copy reads and
/// writes N floats, 2 * N * 4 bytes. `add GB/s` and `copy GB/s` are those bytes over the
/// wall-clock time of each, and `ratio` is add's over the copy's. The copy runs as fast as the
/// GPU moves memory, so a ratio near 1 means add is limited by memory bandwidth, as an
/// elementwise kernel should be. Every call is timed up to cuda::synchronize, so the smallest
/// sizes (a few microseconds of work) also measure the launch and the wait; the reported time
/// is add plus copy.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "tensor/ops/dispatch/copy_kernels.h"
#include "lockstep.h"

namespace {

using namespace lockstep;

// Wall-clock seconds of `work`, including the GPU work it queued.
template <class Work>
double timed(Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  cuda::synchronize(Device::cuda(0));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Argument: log2 of the number of elements.
void BM_AddVsDeviceCopy(benchmark::State& state) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = int64_t(1) << state.range(0);
  const TensorOptions options = TensorOptions().device(Device::cuda(0));
  const Tensor a = rand({n}, options), b = rand({n}, options), copy = empty({n}, options);
  // Warm-up: the first launch and the caching allocator's first allocation of this size.
  timed([&] { benchmark::DoNotOptimize(add(a, b)); });

  double add_seconds = 0, copy_seconds = 0;
  for (auto _ : state) {
    const double add_time = timed([&] { benchmark::DoNotOptimize(add(a, b)); });
    const double copy_time = timed([&] { cuda::copy_between_devices(a, copy, /*non_blocking=*/true); });
    add_seconds += add_time;
    copy_seconds += copy_time;
    state.SetIterationTime(add_time + copy_time);
  }
  const double calls = static_cast<double>(state.iterations());
  const double add_gbs = 3.0 * 4.0 * static_cast<double>(n) * calls / add_seconds * 1e-9;
  const double copy_gbs = 2.0 * 4.0 * static_cast<double>(n) * calls / copy_seconds * 1e-9;
  state.counters["add GB/s"] = add_gbs;
  state.counters["copy GB/s"] = copy_gbs;
  state.counters["ratio"] = add_gbs / copy_gbs;
}

BENCHMARK(BM_AddVsDeviceCopy)->ArgName("log2n")->DenseRange(20, 26, 1)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
