/// \file
/// The bf16 GEMM's dispatch, and its `vdpbf16ps` kernel: the blocked algorithm of gemm.cpp
/// (pack B into 32-column panels, pack A into MR-row panels, multiply MR x NR tiles in
/// registers), with the multiply-add done by the AVX-512 BF16 instruction `vdpbf16ps`. One
/// `vdpbf16ps` takes 16 lanes of 32 bits, each holding two bf16 values, from each operand, and
/// adds the two products of each lane to an f32 accumulator lane:
/// `acc[j] += a[2j] * b[2j] + a[2j+1] * b[2j+1]`. So the operands are packed as pair words
/// (gemm_bf16_pairs.h): the micro-kernel broadcasts one row's A word to all 16 lanes, and 16
/// columns' B words fill one register.
///
/// Each instruction does 32 multiply-adds where an f32 FMA of the same width does 16, and the
/// packed operands are half the bytes. Where a core issues `vdpbf16ps` at the rate of f32 FMAs
/// (AMD Zen 4) that is twice f32's peak; where it issues it at half that rate (Intel's Sapphire
/// Rapids and later) it is f32's peak, and those CPUs have AMX tiles instead
/// (gemm_bf16_amx.cpp), which `gemm_bf16` takes first. The kernels are compiled with function
/// attributes, so this file builds with any -march, and each is called only where the CPU
/// reports its instructions.
#include "tensor/ops/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/cpu/gemm_bf16_amx.h"
#include "tensor/ops/cpu/gemm_bf16_pairs.h"

namespace lockstep::cpu {
namespace {

// The blocking helpers this file shares with the other GEMMs (gemm_blocking.h, gemm_bf16_pairs.h).
using namespace gemm_detail;

#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL

// GCC 12 warns, wrongly, that the "undefined" vector that its own headers pass to several
// AVX-512 intrinsics is used uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The register tile is MR x NR floats: NV = 2 registers of 16 lanes per row, 8 rows, so 16
// accumulators, 2 registers of B and a broadcast A word use 19 of AVX-512's 32 registers, and
// 16 independent sums hide the instruction's latency. MR = 8 divides the row counts of
// chapter 2's CNN (32, 64, 288) exactly, and NR = 32 its filter counts.
constexpr int kMR = kPairColumnRows;
constexpr int kNV = 2;
constexpr int kNR = 16 * kNV;
static_assert(kNR == kPanelColumns, "a register tile is one packed B panel wide");

// The micro-kernel: C = alpha * (A panel) * (B panel) + beta * C for the mr x nr part of one
// MR x NR tile of C (an edge tile is computed whole on the panels' zero padding, and only its
// real part stored, with masked moves) with contiguous rows `ldc` apart, over `pairs` pair words
// of each panel. Step q broadcasts
// each row's A word to 16 lanes and adds its two products with each of the NV B registers.
// The accumulators live in registers for the whole loop; noinline for the reason given at
// gemm.cpp's micro-kernel.
LOCKSTEP_AVX512_BF16 __attribute__((noinline)) void micro_kernel(
    int64_t pairs, const uint32_t* __restrict a, const uint32_t* __restrict b, float alpha,
    float beta, float* __restrict c, int64_t ldc, int64_t mr, int64_t nr) {
  __m512 acc[kMR][kNV];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    __m512bh b_row[kNV];
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) b_row[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512bh a_word = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a_word, b_row[v]);
    }
    a += kMR;
    b += kNR;
  }
  // The first mr rows and nr columns into C.
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= mr) continue;
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) {
      const int64_t lanes = std::min<int64_t>(16, nr - 16 * v);
      if (lanes > 0) store_lanes(c + i * ldc + 16 * v, lanes, acc[i][v], alpha, beta);
    }
  }
}

// The `vdpbf16ps` kernel for gemm_pairs (gemm_bf16_pairs.h). The blocks are counted in k values
// (pairs of them in the packed panels): a KC x NR panel of B is 256 x 32 bf16 = 16 KiB, half of
// a 32 KiB L1d (the smallest of the CPUs with these instructions); an MC x KC block of A is
// 192 x 256 bf16 = 96 KiB of a 1 MiB L2; NC = 4064 (127 x NR) puts a 2 MiB block of B in the
// shared L3.
struct Avx512Bf16Kernel {
  static constexpr int64_t kMR = kPairColumnRows;
  static constexpr int64_t kMC = 192;
  static constexpr int64_t kKC = 256;
  static constexpr int64_t kNC = 4064;

  static int64_t padded_pairs(int64_t pairs) { return pairs; }

  static void pack_a(int64_t mc, int64_t kc, int64_t, const BFloat16* A, int64_t rs, int64_t cs, uint32_t* out) {
    pack_a_pair_columns(mc, kc, A, rs, cs, out);
  }

  // C(mc x nc) = alpha * packed_a * packed_b + beta * C, one MR x NR tile at a time; C's element
  // (i, j) is C[i * c_rs + j * c_cs]. A transposed C goes through `ab`.
  static void multiply(int64_t mc, int64_t nc, int64_t kc, float alpha, const uint32_t* packed_a,
                       const uint32_t* packed_b, float beta, float* C, int64_t c_rs, int64_t c_cs) {
    const int64_t pairs = ceil_div(kc, 2);
    alignas(64) float ab[kMR * kNR];
    for (int64_t jr = 0; jr < nc; jr += kNR) {
      const int64_t nr = std::min<int64_t>(kNR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += kMR) {
        const int64_t mr = std::min<int64_t>(kMR, mc - ir);
        float* c = C + ir * c_rs + jr * c_cs;
        const uint32_t* a = packed_a + ir * pairs;
        const uint32_t* b = packed_b + jr * pairs;
        if (c_cs == 1) {
          micro_kernel(pairs, a, b, alpha, beta, c, c_rs, mr, nr);
        } else {
          micro_kernel(pairs, a, b, 1.0f, 0.0f, ab, kNR, kMR, kNR);
          update_tile<float>(mr, nr, ab, kNR, alpha, beta, c, c_rs, c_cs);
        }
      }
    }
  }
};

#pragma GCC diagnostic pop

#endif  // LOCKSTEP_HAVE_AVX512_BF16_KERNEL

// Whether this CPU runs the `vdpbf16ps` kernel, asked once.
bool avx512_bf16_usable() {
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
  static const bool usable = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return usable;
#else
  return false;
#endif
}

// The path gemm_bf16 takes: the fastest this CPU runs.
GemmBf16Path best_path() {
  if (gemm_bf16_path_available(GemmBf16Path::amx_bf16)) return GemmBf16Path::amx_bf16;
  if (gemm_bf16_path_available(GemmBf16Path::avx512_bf16)) return GemmBf16Path::avx512_bf16;
  return GemmBf16Path::f32_fallback;
}

}  // namespace

bool gemm_bf16_path_available(GemmBf16Path path) {
  switch (path) {
    case GemmBf16Path::amx_bf16: return amx_bf16_usable();
    case GemmBf16Path::avx512_bf16: return avx512_bf16_usable();
    case GemmBf16Path::f32_fallback: return true;
  }
  return false;
}

const char* gemm_bf16_path_name(GemmBf16Path path) {
  switch (path) {
    case GemmBf16Path::amx_bf16: return "amx_bf16";
    case GemmBf16Path::avx512_bf16: return "avx512_bf16";
    case GemmBf16Path::f32_fallback: return "f32 fallback";
  }
  return "unknown";
}

void gemm_bf16_on(GemmBf16Path path, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
                  int64_t a_row_stride, int64_t a_col_stride, const BFloat16* B, int64_t b_row_stride,
                  int64_t b_col_stride, float beta, float* C, int64_t c_row_stride) {
  LOCKSTEP_CHECK(gemm_bf16_path_available(path), "gemm_bf16_on: this CPU cannot run the ",
                 gemm_bf16_path_name(path), " path; ask gemm_bf16_path_available first");
  const bool trivial = M <= 0 || N <= 0 || K <= 0 || alpha == 0.0f;
#ifdef LOCKSTEP_HAVE_AMX_KERNEL
  if (!trivial && path == GemmBf16Path::amx_bf16) {
    gemm_amx_bf16(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
                  c_row_stride);
    return;
  }
#endif
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
  if (!trivial && path == GemmBf16Path::avx512_bf16) {
    gemm_pairs<Avx512Bf16Kernel>(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride,
                                 beta, C, c_row_stride);
    return;
  }
#endif
  gemm_16bit_via_f32(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
                     c_row_stride);
}

PackedBf16A pack_gemm_bf16_a(int64_t M, int64_t K, const BFloat16* A, int64_t a_row_stride,
                             int64_t a_col_stride) {
  PackedBf16A packed;
  packed.M = M;
  packed.K = K;
  packed.A = A;
  packed.row_stride = a_row_stride;
  packed.col_stride = a_col_stride;
  packed.path = best_path();
  if (M <= 0 || K <= 0) return packed;
#ifdef LOCKSTEP_HAVE_AMX_KERNEL
  if (packed.path == GemmBf16Path::amx_bf16) prepack_amx_bf16(M, K, A, a_row_stride, a_col_stride, packed);
#endif
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
  if (packed.path == GemmBf16Path::avx512_bf16) {
    prepack_pairs<Avx512Bf16Kernel>(M, K, A, a_row_stride, a_col_stride, packed);
  }
#endif
  return packed;
}

void gemm_bf16_packed_a(const PackedBf16A& a, int64_t N, float alpha, const BFloat16* B, int64_t b_row_stride,
                        int64_t b_col_stride, float beta, float* C, int64_t c_row_stride) {
  const bool trivial = a.M <= 0 || N <= 0 || a.K <= 0 || alpha == 0.0f;
#ifdef LOCKSTEP_HAVE_AMX_KERNEL
  if (!trivial && a.path == GemmBf16Path::amx_bf16) {
    gemm_amx_bf16_prepacked(a, a.M, N, a.K, alpha, a.A, a.row_stride, a.col_stride, B, b_row_stride, b_col_stride,
                            beta, C, c_row_stride);
    return;
  }
#endif
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
  if (!trivial && a.path == GemmBf16Path::avx512_bf16) {
    gemm_pairs_prepacked<Avx512Bf16Kernel>(a, a.M, N, a.K, alpha, a.A, a.row_stride, a.col_stride, B,
                                           b_row_stride, b_col_stride, beta, C, c_row_stride);
    return;
  }
#endif
  gemm_bf16_on(a.path, a.M, N, a.K, alpha, a.A, a.row_stride, a.col_stride, B, b_row_stride, b_col_stride, beta, C,
               c_row_stride);
}

void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_row_stride,
               int64_t a_col_stride, const BFloat16* B, int64_t b_row_stride, int64_t b_col_stride, float beta,
               float* C, int64_t c_row_stride) {
  static const GemmBf16Path path = best_path();
  gemm_bf16_on(path, M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
               c_row_stride);
}

const char* gemm_bf16_path() { return gemm_bf16_path_name(best_path()); }

}  // namespace lockstep::cpu
