/// \file
/// Benchmark of the bf16 GEMM (src/tensor/ops/cpu/gemm_bf16.cpp) beside the f32 GEMM on the same
/// shapes: square C = A * B, and the products of one training step of chapter 2's CNN.
///
/// How to read it: each row names the kernel (`f32` is `cpu::gemm<float>`, `bf16` is
/// `cpu::gemm_bf16` on the path the first line of the output names, `bf16_via_f32` its portable
/// path forced), the shape and the thread count; `GFLOP/s` counts 2 M N K flops per call over
/// wall-clock time. The bf16 kernel's `vdpbf16ps` does 32 multiply-adds per instruction where
/// an f32 FMA of the same width does 16, so on a CPU that issues both at the same rate its
/// peak is twice f32's; packing and writing C in f32 take the same time for both.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/half.h"
#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/cpu/gemm_bf16.h"

namespace {

using lockstep::BFloat16;

enum class Kernel { kF32, kBf16, kBf16ViaF32 };

// Times C = A * B + beta * C for an M x N x K product with `kernel` on `threads` threads and
// reports GFLOP/s. A is a row-major (M, K) matrix, or with `transpose_a` the transpose of a
// row-major (K, M) one; B likewise.
void time_gemm(benchmark::State& state, Kernel kernel, int64_t M, int64_t N, int64_t K,
               bool transpose_a, bool transpose_b, float beta, int threads) {
#ifdef _OPENMP
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
#endif
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N), c(M * N, 0.0f);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const std::vector<BFloat16> a16(a.begin(), a.end()), b16(b.begin(), b.end());
  const int64_t a_rs = transpose_a ? 1 : K, a_cs = transpose_a ? M : 1;
  const int64_t b_rs = transpose_b ? 1 : N, b_cs = transpose_b ? K : 1;

  for (auto _ : state) {
    switch (kernel) {
      case Kernel::kF32:
        lockstep::cpu::gemm<float>(M, N, K, 1.0f, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs,
                                   beta, c.data(), N);
        break;
      case Kernel::kBf16:
        lockstep::cpu::gemm_bf16(M, N, K, 1.0f, a16.data(), a_rs, a_cs, b16.data(), b_rs, b_cs,
                                 beta, c.data(), N);
        break;
      case Kernel::kBf16ViaF32:
        lockstep::cpu::gemm_16bit_via_f32(M, N, K, 1.0f, a16.data(), a_rs, a_cs, b16.data(), b_rs,
                                         b_cs, beta, c.data(), N);
        break;
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(M) * N * K * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
#ifdef _OPENMP
  omp_set_num_threads(saved_threads);
#endif
}

// Arguments: {n, threads}.
void BM_Square(benchmark::State& state, Kernel kernel) {
  const int64_t n = state.range(0);
  time_gemm(state, kernel, n, n, n, false, false, 0.0f, static_cast<int>(state.range(1)));
}

// Chapter 2's CNN products, with the layouts its layers pass and beta = 1 as the convolutions
// use it (bench_gemm.cpp lists where each comes from). Arguments: {M, N, K, transpose A,
// transpose B, threads}.
void BM_CnnShape(benchmark::State& state, Kernel kernel) {
  time_gemm(state, kernel, state.range(0), state.range(1), state.range(2), state.range(3) != 0,
            state.range(4) != 0, 1.0f, static_cast<int>(state.range(5)));
}

void square_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"})->ArgsProduct({{256, 512, 1024}, {1, 2}});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void cnn_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "tA", "tB", "threads"});
  for (int threads : {1, 2}) {
    b->Args({32, 676, 9, 0, 0, threads});     // conv1 forward
    b->Args({32, 9, 676, 0, 1, threads});     // conv1 weight gradient
    b->Args({64, 121, 288, 0, 0, threads});   // conv2 forward
    b->Args({64, 288, 121, 0, 1, threads});   // conv2 weight gradient
    b->Args({288, 121, 64, 1, 0, threads});   // conv2 input gradient
    b->Args({64, 128, 1600, 0, 1, threads});  // linear 1600 -> 128 forward
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Square, f32, Kernel::kF32)->Apply(square_args);
BENCHMARK_CAPTURE(BM_Square, bf16, Kernel::kBf16)->Apply(square_args);
BENCHMARK_CAPTURE(BM_Square, bf16_via_f32, Kernel::kBf16ViaF32)->Apply(square_args);
BENCHMARK_CAPTURE(BM_CnnShape, f32, Kernel::kF32)->Apply(cnn_args);
BENCHMARK_CAPTURE(BM_CnnShape, bf16, Kernel::kBf16)->Apply(cnn_args);
BENCHMARK_CAPTURE(BM_CnnShape, bf16_via_f32, Kernel::kBf16ViaF32)->Apply(cnn_args);

// Names the bf16 path before the table, so a saved output says which kernel `bf16` was.
const bool kPathPrinted = [] {
  std::printf("cpu::gemm_bf16 path: %s\n", lockstep::cpu::gemm_bf16_path());
  return true;
}();

}  // namespace
