/// \file
/// The CPU's peak arithmetic rate, measured: what a training step's GFLOP/s is a fraction of.
///
///     build/tests/peak_flops [SECONDS]      (SECONDS per measurement, default 0.3)
///
/// Each measurement keeps independent chains of fused multiply-adds in registers, never
/// touching memory, so nothing but the vector units limits it:
///   f32 FMA        acc = acc * a + b on every lane: 2 flops per lane per instruction
///                  (AVX-512: 16 lanes; AVX2 with FMA: 8);
///   bf16 dot       acc += a0 * b0 + a1 * b1 on every f32 lane from pairs of bf16 values
///                  (AVX-512 BF16's vdpbf16ps): 4 flops per lane per instruction.
/// Enough chains (kChains) run side by side to hide the instructions' latency on two FMA pipes.
/// It reports one thread (one core: the honest unit for a kernel's efficiency) and every thread
/// of OpenMP's team, each the best of three runs, and ends with a RESULT line:
///     RESULT peak f32_1=... f32_all=... bf16_1=... bf16_all=... threads=N isa=...
/// in GFLOP/s; bf16 fields are 0 where the CPU has no bf16 dot product.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <immintrin.h>

namespace {

constexpr int kChains = 16;

using Clock = std::chrono::steady_clock;

// Runs `kernel(iterations)` until it has taken at least `seconds`, doubling the iterations;
// returns the flops per second of the last run. `flops_per_iteration` counts one thread's.
template <class Kernel>
double rate(Kernel kernel, double flops_per_iteration, double seconds, bool all_threads) {
  int64_t iterations = 1 << 16;
  for (;;) {
    const auto start = Clock::now();
    int threads = 1;
    float sink = 0.0f;
    if (all_threads) {
#pragma omp parallel reduction(+ : sink)
      {
        sink += kernel(iterations);
#pragma omp single
        threads = omp_get_num_threads();
      }
    } else {
      sink = kernel(iterations);
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    // The sum is printed nowhere, but compared, so the compiler must compute it.
    if (sink == 12345.678f) std::puts("");
    if (elapsed >= seconds) return flops_per_iteration * static_cast<double>(iterations) * threads / elapsed;
    iterations *= 2;
  }
}

// Best of three: the other programs on the machine only ever slow a run down.
template <class Kernel>
double best_rate(Kernel kernel, double flops_per_iteration, double seconds, bool all_threads) {
  double best = 0.0;
  for (int run = 0; run < 3; ++run) best = std::max(best, rate(kernel, flops_per_iteration, seconds, all_threads));
  return best;
}

#if defined(__AVX512F__)
// The lanes' sum (through memory: GCC 12's _mm512_reduce_add_ps warns about its own header).
float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

const char* const kIsa = "avx512";
constexpr int kLanes = 16;

float f32_fma(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm512_add_ps(total, acc[c]);
  return lane_sum(total);
}
#elif defined(__AVX2__) && defined(__FMA__)
const char* const kIsa = "avx2+fma";
constexpr int kLanes = 8;

float f32_fma(int64_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm256_add_ps(total, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}
#else
const char* const kIsa = "scalar";
constexpr int kLanes = 1;

float f32_fma(int64_t iterations) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = 0.001f * static_cast<float>(c);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * 0.999f + 0.001f;
  }
  float sum = 0.0f;
  for (float value : acc) sum += value;
  return sum;
}
#endif

#if defined(__AVX512BF16__)
constexpr bool kHasBf16Dot = true;

float bf16_dot(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_setzero_ps();
  // Pairs of small bf16 values: the sums grow slowly and stay finite.
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.001f), _mm512_set1_ps(0.002f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.003f), _mm512_set1_ps(0.004f));
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm512_add_ps(total, acc[c]);
  return lane_sum(total);
}
#else
constexpr bool kHasBf16Dot = false;

float bf16_dot(int64_t) { return 0.0f; }
#endif

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.3;
  if (argc > 2 || (argc == 2 && !((seconds = std::atof(argv[1])) > 0.0 && seconds <= 60.0))) {
    std::fprintf(stderr, "usage: %s [SECONDS]   (SECONDS per measurement, above 0 and at most 60; default 0.3)\n",
                 argv[0]);
    return 2;
  }
  const double f32_flops = 2.0 * kLanes * kChains;   // per iteration of f32_fma
  const double bf16_flops = 4.0 * 16 * kChains;      // per iteration of bf16_dot
  const int threads = omp_get_max_threads();
  const double f32_one = best_rate(f32_fma, f32_flops, seconds, false) / 1e9;
  const double f32_all = best_rate(f32_fma, f32_flops, seconds, true) / 1e9;
  double bf16_one = 0.0, bf16_all = 0.0;
  if (kHasBf16Dot) {
    bf16_one = best_rate(bf16_dot, bf16_flops, seconds, false) / 1e9;
    bf16_all = best_rate(bf16_dot, bf16_flops, seconds, true) / 1e9;
  }
  std::printf("f32 FMA (%s, %d lanes):  %8.1f GFLOP/s on 1 thread, %8.1f on %d\n", kIsa, kLanes, f32_one, f32_all,
              threads);
  if (kHasBf16Dot) {
    std::printf("bf16 dot (vdpbf16ps):      %8.1f GFLOP/s on 1 thread, %8.1f on %d\n", bf16_one, bf16_all, threads);
  } else {
    std::printf("bf16 dot: this CPU (or this build) has no AVX-512 BF16 dot product\n");
  }
  std::printf("RESULT peak f32_1=%.1f f32_all=%.1f bf16_1=%.1f bf16_all=%.1f threads=%d isa=%s\n", f32_one, f32_all,
              bf16_one, bf16_all, threads, kIsa);
  return 0;
}
