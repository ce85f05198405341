/// \file
/// The CPU's limits, measured: its peak arithmetic rate (the library's peak kernels,
/// tensor/ops/cpu/peak_flops.h: f32 FMA, bf16 dot products and AMX tile dots kept in registers)
/// on one thread or on all, and its bandwidth (STREAM's copy and triad, over arrays far larger
/// than the caches and over arrays that fit in the L3). peak_flops.cpp prints the peaks;
/// cnn_roofline.cpp measures them again at its start and divides each layer's GFLOP/s by them.
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "tensor/ops/cpu/peak_flops.h"

namespace peak {

using Clock = std::chrono::steady_clock;
using lockstep::cpu::PeakKernel;

/// `kernel`'s rate in flops per second, the best of three runs of at least `seconds` each;
/// `all_threads` runs it on every thread of OpenMP's team at once (omp_set_num_threads decides
/// how many) and counts them all.
inline double best_rate(PeakKernel kernel, double seconds, bool all_threads) {
  if (!all_threads) return lockstep::cpu::peak_kernel_rate(kernel, seconds);
  double best = 0.0;
  for (int run = 0; run < 3; ++run) {
    for (int64_t iterations = 1 << 10;; iterations *= 2) {
      const auto start = Clock::now();
      int threads = 1;
      float sink = 0.0f;
#pragma omp parallel reduction(+ : sink)
      {
        sink += lockstep::cpu::run_peak_kernel(kernel, iterations);
#pragma omp single
        threads = omp_get_num_threads();
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      // The sum is printed nowhere, but compared, so the compiler must compute it.
      if (sink == 12345.678f) std::puts("");
      if (elapsed >= seconds) {
        best = std::max(best, lockstep::cpu::peak_kernel_flops(kernel) * static_cast<double>(iterations) * threads /
                                  elapsed);
        break;
      }
    }
  }
  return best;
}

#if defined(__AVX512F__)
inline const char* const kIsa = "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
inline const char* const kIsa = "avx2+fma";
#else
inline const char* const kIsa = "scalar";
#endif

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
