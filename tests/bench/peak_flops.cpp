/// \file
/// The CPU's peak arithmetic rate, measured: what a training step's GFLOP/s is a fraction of.
///
///     build/tests/peak_flops [SECONDS]      (SECONDS per measurement, default 0.3)
///
/// Each measurement keeps independent chains of multiply-adds in registers, never touching
/// memory, so nothing but the arithmetic units limits it (the library's peak kernels,
/// tensor/ops/cpu/peak_flops.h, which the chapters' mfu= divides by): f32 FMA, 2 flops per lane
/// per instruction; bf16 dot products (AVX-512 BF16's vdpbf16ps), 4 flops per f32 lane per
/// instruction; AMX tile dot products (tdpbf16ps), 16,384 flops per instruction.
/// It reports one thread (one core: the honest unit for a kernel's efficiency) and every thread
/// of OpenMP's team, each the best of three runs, and ends with a RESULT line:
///     RESULT peak f32_1=... f32_all=... bf16_1=... bf16_all=... amx_1=... amx_all=... threads=N isa=...
/// in GFLOP/s; the bf16 and amx fields are 0 where the CPU lacks those instructions.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "peak.h"

namespace {

// One thread's and every thread's GFLOP/s for `kernel`, or zeros where the CPU lacks it; printed.
struct Rates {
  double one = 0.0, all = 0.0;
};

Rates measure(peak::PeakKernel kernel, const char* name, double seconds, int threads) {
  Rates r;
  if (!lockstep::cpu::peak_kernel_available(kernel)) {
    std::printf("%-22s this CPU (or this build) does not have it\n", name);
    return r;
  }
  r.one = peak::best_rate(kernel, seconds, false) / 1e9;
  r.all = peak::best_rate(kernel, seconds, true) / 1e9;
  std::printf("%-22s %9.1f GFLOP/s on 1 thread, %9.1f on %d\n", name, r.one, r.all, threads);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.3;
  if (argc > 2 || (argc == 2 && !((seconds = std::atof(argv[1])) > 0.0 && seconds <= 60.0))) {
    std::fprintf(stderr, "usage: %s [SECONDS]   (SECONDS per measurement, above 0 and at most 60; default 0.3)\n",
                 argv[0]);
    return 2;
  }
  const int threads = omp_get_max_threads();
  using peak::PeakKernel;
  const Rates f32 = measure(PeakKernel::f32_fma, (std::string("f32 FMA (") + peak::kIsa + "):").c_str(), seconds,
                            threads);
  const Rates bf16 = measure(PeakKernel::bf16_dot, "bf16 dot (vdpbf16ps):", seconds, threads);
  const Rates amx = measure(PeakKernel::amx_dot, "AMX dot (tdpbf16ps):", seconds, threads);
  std::printf("RESULT peak f32_1=%.1f f32_all=%.1f bf16_1=%.1f bf16_all=%.1f amx_1=%.1f amx_all=%.1f threads=%d isa=%s\n",
              f32.one, f32.all, bf16.one, bf16.all, amx.one, amx.all, threads, peak::kIsa);
  return 0;
}
