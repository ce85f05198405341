// The peak kernels (peak_flops.h): chains of multiply-adds kept in registers, and their rates.
#include "tensor/ops/cpu/peak_flops.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "tensor/ops/cpu/gemm_bf16.h"
#include "tensor/ops/cpu/gemm_bf16_amx.h"

namespace lockstep::cpu {
namespace {

// Independent chains per kernel: enough to cover an FMA's latency (4 cycles) on two pipes.
constexpr int kChains = 16;

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

// kChains chains of acc = acc * a + b on the widest vectors the build uses, written with the GCC
// vector extension: each step compiles to one FMA instruction (GCC contracts a multiply and an
// add into an FMA where the build allows), or to a multiply and an add on a CPU without FMA.
template <class T>
float fma_chains(int64_t iterations) {
  constexpr int kLanes = kVectorBytes / sizeof(T);
  typedef T Vec __attribute__((vector_size(kVectorBytes)));
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec{} + T(0.001) * static_cast<T>(c);
  const Vec a = Vec{} + T(0.999), b = Vec{} + T(0.001);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  }
  Vec total = acc[0];
  for (int c = 1; c < kChains; ++c) total += acc[c];
  T sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += total[l];
  return static_cast<float>(sum);
}

#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
// kChains chains of vdpbf16ps on pairs of small bf16 values: the sums grow slowly and stay finite.
LOCKSTEP_AVX512_BF16 float bf16_dot_chains(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_setzero_ps();
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.001f), _mm512_set1_ps(0.002f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.003f), _mm512_set1_ps(0.004f));
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm512_add_ps(total, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}
#endif

const char* kernel_name(PeakKernel kernel) {
  switch (kernel) {
    case PeakKernel::f32_fma: return "f32 FMA";
    case PeakKernel::f64_fma: return "f64 FMA";
    case PeakKernel::bf16_dot: return "bf16 dot (vdpbf16ps)";
    case PeakKernel::amx_dot: return "AMX dot (tdpbf16ps)";
  }
  return "unknown";
}

}  // namespace

bool peak_kernel_available(PeakKernel kernel) {
  switch (kernel) {
    case PeakKernel::f32_fma:
    case PeakKernel::f64_fma: return true;
    case PeakKernel::bf16_dot: return gemm_bf16_path_available(GemmBf16Path::avx512_bf16);
    case PeakKernel::amx_dot: return gemm_bf16_path_available(GemmBf16Path::amx_bf16);
  }
  return false;
}

double peak_kernel_flops(PeakKernel kernel) {
  switch (kernel) {
    case PeakKernel::f32_fma: return 2.0 * (kVectorBytes / 4) * kChains;
    case PeakKernel::f64_fma: return 2.0 * (kVectorBytes / 8) * kChains;
    case PeakKernel::bf16_dot: return 4.0 * 16 * kChains;
    case PeakKernel::amx_dot: return 4 * 2.0 * 16 * 16 * 32;  // four tiles of 16 x 16 x 32 multiply-adds
  }
  return 0.0;
}

float run_peak_kernel(PeakKernel kernel, int64_t iterations) {
  LOCKSTEP_CHECK(peak_kernel_available(kernel), "run_peak_kernel: this CPU has no ", kernel_name(kernel));
  switch (kernel) {
    case PeakKernel::f32_fma: return fma_chains<float>(iterations);
    case PeakKernel::f64_fma: return fma_chains<double>(iterations);
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
    case PeakKernel::bf16_dot: return bf16_dot_chains(iterations);
#endif
#ifdef LOCKSTEP_HAVE_AMX_KERNEL
    case PeakKernel::amx_dot: return gemm_detail::amx_dot_chains(iterations);
#endif
    default: break;
  }
  return 0.0f;
}

double peak_kernel_rate(PeakKernel kernel, double seconds) {
  using Clock = std::chrono::steady_clock;
  double best = 0.0;
  for (int run = 0; run < 3; ++run) {
    // Doubling the iterations until one run lasts `seconds`.
    for (int64_t iterations = 1 << 10;; iterations *= 2) {
      const auto start = Clock::now();
      const float sink = run_peak_kernel(kernel, iterations);
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      // The sum is printed nowhere, but compared, so the compiler must compute it.
      if (sink == 12345.678f) std::puts("");
      if (elapsed >= seconds) {
        best = std::max(best, peak_kernel_flops(kernel) * static_cast<double>(iterations) / elapsed);
        break;
      }
    }
  }
  return best;
}

PeakKernel peak_kernel_for(DType dtype) {
  if (dtype == DType::f64) return PeakKernel::f64_fma;
  if (dtype == DType::bf16) {
    if (gemm_bf16_path_available(GemmBf16Path::amx_bf16)) return PeakKernel::amx_dot;
    if (gemm_bf16_path_available(GemmBf16Path::avx512_bf16)) return PeakKernel::bf16_dot;
  }
  return PeakKernel::f32_fma;
}

double core_peak_flops(DType dtype) {
  // One measurement per kernel, remembered: indexed by PeakKernel.
  static double measured[4] = {};
  const PeakKernel kernel = peak_kernel_for(dtype);
  double& rate = measured[static_cast<int>(kernel)];
  if (rate == 0.0) rate = peak_kernel_rate(kernel, 0.02);
  return rate;
}

}  // namespace lockstep::cpu
