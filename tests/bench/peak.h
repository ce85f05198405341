/// \file
/// The CPU's limits, measured: its peak arithmetic rate (f32 FMA and bf16 dot products kept in
/// registers) and its bandwidth (STREAM's copy and triad, over arrays far larger than the caches
/// and over arrays that fit in the L3). peak_flops.cpp prints the peaks; cnn_roofline.cpp
/// measures them again at its start and divides each layer's GFLOP/s by them.
///
/// The arithmetic measurements keep independent chains of fused multiply-adds in registers,
/// never touching memory, so nothing but the vector units limits them:
///   f32 FMA        acc = acc * a + b on every lane: 2 flops per lane per instruction
///                  (AVX-512: 16 lanes; AVX2 with FMA: 8);
///   bf16 dot       acc += a0 * b0 + a1 * b1 on every f32 lane from pairs of bf16 values
///                  (AVX-512 BF16's vdpbf16ps): 4 flops per lane per instruction.
/// Enough chains (kChains) run side by side to hide the instructions' latency on two FMA pipes.
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <immintrin.h>

namespace peak {

constexpr int kChains = 16;

using Clock = std::chrono::steady_clock;

// Runs `kernel(iterations)` until it has taken at least `seconds`, doubling the iterations;
// returns the flops per second of the last run. `flops_per_iteration` counts one thread's.
// `all_threads` runs it on every thread of OpenMP's team (omp_set_num_threads decides how many).
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
inline const char* const kIsa = "avx512";
constexpr int kLanes = 16;

// The lanes' sum (through memory: GCC 12's _mm512_reduce_add_ps warns about its own header).
inline float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}
#elif defined(__AVX2__) && defined(__FMA__)
inline const char* const kIsa = "avx2+fma";
constexpr int kLanes = 8;
#else
inline const char* const kIsa = "scalar";
constexpr int kLanes = 1;
#endif

// kChains chains of acc = acc * a + b on vectors of kLanes floats, written with the GCC vector
// extension: each step compiles to one FMA instruction of the widest vectors the build may use
// (GCC contracts a multiply and an add into an FMA by default), and to a multiply and an add on
// a CPU without FMA.
inline float f32_fma(int64_t iterations) {
  typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec{} + 0.001f * static_cast<float>(c);
  const Vec a = Vec{} + 0.999f, b = Vec{} + 0.001f;
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  }
  Vec total = acc[0];
  for (int c = 1; c < kChains; ++c) total += acc[c];
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += total[l];
  return sum;
}

#if defined(__AVX512BF16__)
constexpr bool kHasBf16Dot = true;

inline float bf16_dot(int64_t iterations) {
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

inline float bf16_dot(int64_t) { return 0.0f; }
#endif

constexpr double kF32Flops = 2.0 * kLanes * kChains;  // per iteration of f32_fma
constexpr double kBf16Flops = 4.0 * 16 * kChains;     // per iteration of bf16_dot

/// Bandwidth in GB/s (10^9 bytes per second) of STREAM's two kernels, as STREAM counts bytes
/// (each array read or written once; the write's cache-line fill is not counted).
struct Bandwidth {
  double copy = 0.0;   ///< a[i] = b[i]: 8 bytes per element.
  double triad = 0.0;  ///< a[i] = b[i] + s * c[i]: 12 bytes per element.
};

/// STREAM's copy and triad on `threads` threads over three arrays of `values` floats each, each
/// the best of `runs` passes. Where the three arrays fit in a cache, that cache's bandwidth.
inline Bandwidth stream(int threads, int64_t values, int runs) {
  const int64_t n = values;
  std::vector<float> a(n), b(n), c(n);
  // Written by the threads that will read them, so that pages land near them.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  const float s = 0.5f;
  Bandwidth best;
  for (int run = 0; run < runs; ++run) {
    auto start = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i];
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best.copy = std::max(best.copy, 8.0 * n / seconds / 1e9);
    start = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best.triad = std::max(best.triad, 12.0 * n / seconds / 1e9);
  }
  // Read back, so that the compiler cannot drop the passes.
  if (a[n / 2] == 12345.678f) std::puts("");
  return best;
}

/// Main memory's bandwidth: arrays of 256 MiB each, 768 MiB in all, far beyond the L3 (the
/// 2-core AMD EPYC's lscpu says 32 MiB and glibc's sysconf 320 MiB; this exceeds both).
inline Bandwidth memory_bandwidth(int threads) { return stream(threads, int64_t{1} << 26, 5); }

/// The L3 cache's bandwidth: arrays of 2 MiB each, 6 MiB in all, beyond a 1 MiB L2 and well
/// inside a 32 MiB L3. On one core of the 2-core AMD EPYC, copy ran at 93-102 GB/s for 1.5 to
/// 12 MiB in all, 73 at 24 MiB, 39 at 48 MiB and memory's 24-28 from 96 MiB.
inline Bandwidth l3_bandwidth(int threads) { return stream(threads, int64_t{1} << 19, 100); }

}  // namespace peak
