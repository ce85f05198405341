/// \file
/// Benchmark of the CPU GEMM (src/ops/cpu/gemm.cpp): square float C = A * B.
///
/// How to read it: each row is one size `n` (C is n x n, 2 * n^3 flops per call) and one
/// thread count `threads`. The `GFLOP/s` column is the useful number; times are wall-clock
/// ("real time") because the work is spread over several threads, and CPU time would add
/// up all of them.
///
/// Compare GFLOP/s with the machine's peak. A core with AVX2 and two FMA units finishes
/// 2 FMA instructions per cycle, each on 8 floats, and an FMA counts as 2 flops:
///
///     peak GFLOP/s = cores x GHz x 2 (FMA units) x 8 (floats per 256-bit register) x 2
///
/// e.g. 2 cores at 2.6 GHz: 2 x 2.6 x 32 = 166 GFLOP/s. Look up the clock with
/// `grep MHz /proc/cpuinfo` (turbo clocks may be higher than what it shows). A good GEMM
/// reaches 70-90% of peak at large n; small n pays more for packing and thread start-up.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/cpu/gemm.h"

namespace {

// Arguments: {n, threads}.
void BM_SgemmSquare(benchmark::State& state) {
  const int64_t n = state.range(0);
#ifdef _OPENMP
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(state.range(1)));
#endif
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);

  for (auto _ : state) {
    lockstep::cpu::gemm<float>(n, n, n, 1.0f, a.data(), n, 1, b.data(), n, 1, 0.0f,
                               c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  // kIsRate divides by the elapsed time; the factor 1e-9 turns flop/s into GFLOP/s.
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(n) * n * n * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
#ifdef _OPENMP
  omp_set_num_threads(saved_threads);
#endif
}

BENCHMARK(BM_SgemmSquare)
    ->ArgNames({"n", "threads"})
    ->ArgsProduct({{256, 512, 1024, 2048}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
