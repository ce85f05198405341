/// \file
/// The CPU's peak arithmetic rate, measured: what a training step's GFLOP/s is a fraction of.
///
///     build/tests/peak_flops [SECONDS]      (SECONDS per measurement, default 0.3)
///
/// Each measurement keeps independent chains of fused multiply-adds in registers, never
/// touching memory, so nothing but the vector units limits it (peak.h has the kernels, which
/// cnn_roofline.cpp shares): f32 FMA, 2 flops per lane per instruction, and bf16 dot products
/// (AVX-512 BF16's vdpbf16ps), 4 flops per f32 lane per instruction.
/// It reports one thread (one core: the honest unit for a kernel's efficiency) and every thread
/// of OpenMP's team, each the best of three runs, and ends with a RESULT line:
///     RESULT peak f32_1=... f32_all=... bf16_1=... bf16_all=... threads=N isa=...
/// in GFLOP/s; bf16 fields are 0 where the CPU has no bf16 dot product.
#include <omp.h>

#include <cstdio>
#include <cstdlib>

#include "peak.h"

int main(int argc, char** argv) {
  double seconds = 0.3;
  if (argc > 2 || (argc == 2 && !((seconds = std::atof(argv[1])) > 0.0 && seconds <= 60.0))) {
    std::fprintf(stderr, "usage: %s [SECONDS]   (SECONDS per measurement, above 0 and at most 60; default 0.3)\n",
                 argv[0]);
    return 2;
  }
  const int threads = omp_get_max_threads();
  const double f32_one = peak::best_rate(peak::f32_fma, peak::kF32Flops, seconds, false) / 1e9;
  const double f32_all = peak::best_rate(peak::f32_fma, peak::kF32Flops, seconds, true) / 1e9;
  double bf16_one = 0.0, bf16_all = 0.0;
  if (peak::kHasBf16Dot) {
    bf16_one = peak::best_rate(peak::bf16_dot, peak::kBf16Flops, seconds, false) / 1e9;
    bf16_all = peak::best_rate(peak::bf16_dot, peak::kBf16Flops, seconds, true) / 1e9;
  }
  std::printf("f32 FMA (%s, %d lanes):  %8.1f GFLOP/s on 1 thread, %8.1f on %d\n", peak::kIsa, peak::kLanes,
              f32_one, f32_all, threads);
  if (peak::kHasBf16Dot) {
    std::printf("bf16 dot (vdpbf16ps):      %8.1f GFLOP/s on 1 thread, %8.1f on %d\n", bf16_one, bf16_all, threads);
  } else {
    std::printf("bf16 dot: this CPU (or this build) has no AVX-512 BF16 dot product\n");
  }
  std::printf("RESULT peak f32_1=%.1f f32_all=%.1f bf16_1=%.1f bf16_all=%.1f threads=%d isa=%s\n", f32_one, f32_all,
              bf16_one, bf16_all, threads, peak::kIsa);
  return 0;
}
