/// \file
/// Benchmark of the CPU GEMM (src/tensor/ops/cpu/gemm.cpp): square float C = A * B, and the small,
/// far from square products one training step of chapter 2's CNN makes.
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

#include "tensor/ops/cpu/gemm.h"

namespace {

// Times C = A * B + beta * C for an M x N x K product on `threads` threads and reports GFLOP/s.
// A is a row-major (M, K) matrix, or with `transpose_a` the transpose of a row-major (K, M)
// one, which is how a caller passes A^T; B likewise.
void time_gemm(benchmark::State& state, int64_t M, int64_t N, int64_t K, bool transpose_a,
               bool transpose_b, float beta, int threads) {
#ifdef _OPENMP
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
#endif
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N), c(M * N, 0.0f);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const int64_t a_rs = transpose_a ? 1 : K, a_cs = transpose_a ? M : 1;
  const int64_t b_rs = transpose_b ? 1 : N, b_cs = transpose_b ? K : 1;

  for (auto _ : state) {
    lockstep::cpu::gemm<float>(M, N, K, 1.0f, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs, beta,
                               c.data(), N);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  // kIsRate divides by the elapsed time; the factor 1e-9 turns flop/s into GFLOP/s.
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(M) * N * K * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
#ifdef _OPENMP
  omp_set_num_threads(saved_threads);
#endif
}

// Arguments: {n, threads}.
void BM_SgemmSquare(benchmark::State& state) {
  const int64_t n = state.range(0);
  time_gemm(state, n, n, n, false, false, 0.0f, static_cast<int>(state.range(1)));
}

BENCHMARK(BM_SgemmSquare)
    ->ArgNames({"n", "threads"})
    ->ArgsProduct({{256, 512, 1024, 2048}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The products of chapter 2's CNN, on one thread, with the layouts its layers pass (a 1
// transposes that operand) and beta = 1 as the convolutions use it: per image for the
// convolutions (1 -> 32 channels on 28 x 28, then 32 -> 64 on 13 x 13, 3 x 3 kernels), and
// once per batch of 64 for the first linear layer. Arguments: {M, N, K, transpose A,
// transpose B}. Their GFLOP/s show what small shapes cost: a K of 9 leaves little arithmetic
// to pay for packing and for writing C.
void BM_SgemmCnnShape(benchmark::State& state) {
  time_gemm(state, state.range(0), state.range(1), state.range(2), state.range(3) != 0,
            state.range(4) != 0, 1.0f, 1);
}

BENCHMARK(BM_SgemmCnnShape)
    ->ArgNames({"M", "N", "K", "tA", "tB"})
    ->Args({32, 676, 9, 0, 0})     // conv1 forward: W (32, 9) . cols (9, 676)
    ->Args({32, 9, 676, 0, 1})     // conv1 weight gradient: dy (32, 676) . cols^T
    ->Args({64, 121, 288, 0, 0})   // conv2 forward
    ->Args({64, 288, 121, 0, 1})   // conv2 weight gradient
    ->Args({288, 121, 64, 1, 0})   // conv2 input gradient: W^T (288, 64) . dy (64, 121)
    ->Args({64, 128, 1600, 0, 1})  // linear 1600 -> 128 forward: x . W^T
    ->Unit(benchmark::kMicrosecond);

}  // namespace
