/// \file
/// The bf16 GEMM: the blocked algorithm of gemm.cpp (pack B into NR-wide panels, pack A into
/// MR-tall panels, multiply MR x NR tiles in registers), with the multiply-add done by the
/// AVX-512 BF16 instruction `vdpbf16ps`. One `vdpbf16ps` takes 16 lanes of 32 bits, each
/// holding two bf16 values, from each operand, and adds the two products of each lane to an
/// f32 accumulator lane: `acc[j] += a[2j] * b[2j] + a[2j+1] * b[2j+1]`. So the packing groups
/// the sum into pairs along K:
///
///   - an A panel holds, for each pair q of k values and each of its MR rows, one 32-bit word
///     (A(i, 2q), A(i, 2q+1)); the micro-kernel broadcasts it to all 16 lanes;
///   - a B panel holds, for each pair q and each of its NR columns, the word
///     (B(2q, j), B(2q+1, j)); 16 columns fill one 512-bit register.
///
/// An odd K gets a zero as the second half of its last pair. Each instruction does 32
/// multiply-adds where an f32 FMA of the same width does 16, and the packed operands are half
/// the bytes. The kernel is compiled for AVX-512 BF16 with a function attribute, so this file
/// builds with any -march, and is called only where the CPU reports the instructions.
#include "tensor/ops/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/cpu/gemm_blocking.h"

#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 10)
#define LOCKSTEP_HAVE_AVX512_BF16_KERNEL 1
#include <immintrin.h>
#endif

namespace lockstep::cpu {
namespace {

// The blocking helpers this file shares with the other GEMMs (gemm_blocking.h): ceil_div,
// round_up, gemm_threads, scratch and update_tile.
using namespace gemm_detail;

#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL

// GCC 12 warns, wrongly, that the "undefined" vector that its own headers pass to several
// AVX-512 intrinsics (unpacks, lane shuffles) is used uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The register tile is MR x NR floats: NV = 2 registers of 16 lanes per row, 8 rows, so 16
// accumulators, 2 registers of B and a broadcast A word use 19 of AVX-512's 32 registers, and
// 16 independent sums hide the instruction's latency. MR = 8 divides the row counts of
// chapter 2's CNN (32, 64, 288) exactly, and NR = 32 its filter counts.
// The blocks are counted in k values (pairs of them in the packed panels): a KC x NR panel of
// B is 256 x 32 bf16 = 16 KiB, half of a 32 KiB L1d (the smallest of the CPUs with these instructions); an MC x KC block of A is 192 x 256 bf16
// = 96 KiB of a 1 MiB L2; NC = 4064 (127 x NR) puts a 2 MiB block of B in the shared L3.
constexpr int kMR = 8;
constexpr int kNV = 2;
constexpr int kNR = 16 * kNV;
constexpr int64_t kMC = 192;
constexpr int64_t kKC = 256;
constexpr int64_t kNC = 4064;

// Below this many multiply-adds waking the other threads costs more than it saves.
constexpr int64_t kSmallProblem = 32 * 1024;


// The 32-bit word holding the pair (lo, hi) as `vdpbf16ps` reads it: lo in the low half.
uint32_t pair_word(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// The bits of X[k * stride], or 0 (the zero pad of an odd K) when k is past kc.
uint16_t bits_at(const BFloat16* X, int64_t k, int64_t stride, int64_t kc) {
  return k < kc ? X[k * stride].bits : uint16_t(0);
}

// Packing reads every value of both operands once per product, and on the convolutions' small
// products (a 288-long K, 121 columns), one word at a time, it cost a large share of the
// arithmetic's time (tests/bench/README.md). So the two layouts that the convolutions and linear layers
// pass are packed 16 or 32 words per instruction:
//
//   - a pair's two values adjacent in memory (the K stride is 1): each row (of A) or column (of
//     B) is a run of 32-bit words already, and 16 runs of up to 16 words are transposed in
//     registers (gathering the words is slower; tests/bench/README.md);
//   - the packed dimension adjacent (the other stride is 1): the two k rows of a pair are
//     loaded whole and interleaved 16 bits at a time.
//
// Anything else, and the odd last pair of a slice (whose second value is padding and whose
// 32-bit load could read past the operand's end), goes one word at a time.
#define LOCKSTEP_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// The 16-bit lanes [0, n) of a mask, n <= 32.
LOCKSTEP_AVX512_BF16 __mmask32 first_lanes(int64_t n) {
  return static_cast<__mmask32>(n >= 32 ? ~0u : (1u << n) - 1);
}

// Transposes the 16 x 16 matrix of 32-bit words whose rows are r[0..15]: afterwards r[q] holds
// word q of every former row. Four rounds of shuffles: pairs, quads, then 128-bit lanes twice.
// Always inlined: as a call, its 16 rows went through memory (tests/bench/README.md).
LOCKSTEP_AVX512_BF16 inline __attribute__((always_inline)) void transpose_words(__m512i r[16]) {
  __m512i t[16];
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
  }
  // u[4g + m], lane L: word 4L + m of rows 4g .. 4g + 3.
  __m512i u[16];
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  // Word 4L + m of all rows is lane L of u[m], u[4 + m], u[8 + m], u[12 + m].
  for (int m = 0; m < 4; ++m) {
    const __m512i x = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44);
    const __m512i y = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);
    const __m512i z = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
    const __m512i v = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
    r[m] = _mm512_shuffle_i32x4(x, z, 0x88);
    r[4 + m] = _mm512_shuffle_i32x4(x, z, 0xDD);
    r[8 + m] = _mm512_shuffle_i32x4(y, v, 0x88);
    r[12 + m] = _mm512_shuffle_i32x4(y, v, 0xDD);
  }
}

// Loads words [0, n) (n <= 16) of the run of pair words starting at `run` into r, zero past n.
LOCKSTEP_AVX512_BF16 __m512i load_words(const BFloat16* run, int64_t n) {
  return _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << n) - 1), run);
}

// Packs the mc x kc block of A into MR-row panels of pair words: word (q, i) of a panel is
// (A(i, 2q), A(i, 2q + 1)). Rows past mc and the second half of an odd kc's last pair are 0.
LOCKSTEP_AVX512_BF16 void pack_a(int64_t mc, int64_t kc, const BFloat16* A, int64_t rs, int64_t cs,
                                 uint32_t* out) {
  const int64_t pairs = ceil_div(kc, 2), full_pairs = kc / 2;
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t mr = std::min<int64_t>(kMR, mc - ir);
    const BFloat16* panel = A + ir * rs;
    int64_t q = 0;
    if (cs == 1) {
      // Up to 16 pairs of the panel's rows at a time; rows 8-15 of the transpose stay 0.
      for (; q < full_pairs; q += 16) {
        const int64_t n = std::min<int64_t>(16, full_pairs - q);
        __m512i r[16];
        for (int i = 0; i < 16; ++i)
          r[i] = i < mr ? load_words(panel + i * rs + 2 * q, n) : _mm512_setzero_si512();
        transpose_words(r);
        for (int64_t k = 0; k < n; ++k)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (q + k) * kMR), _mm512_castsi512_si256(r[k]));
      }
      q = full_pairs;
    } else if (rs == 1) {
      // Rows i of k = 2q and k = 2q + 1 are each 8 adjacent values; interleaving them gives the words.
      const __mmask8 valid = static_cast<__mmask8>((1u << mr) - 1);
      for (; q < full_pairs; ++q) {
        const __m128i even = _mm_maskz_loadu_epi16(valid, panel + 2 * q * cs);
        const __m128i odd = _mm_maskz_loadu_epi16(valid, panel + (2 * q + 1) * cs);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + q * kMR), _mm_unpacklo_epi16(even, odd));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + q * kMR + 4), _mm_unpackhi_epi16(even, odd));
      }
    }
    for (; q < pairs; ++q) {
      uint32_t* word = out + q * kMR;
      for (int64_t i = 0; i < mr; ++i) {
        const BFloat16* row = panel + i * rs;
        word[i] = pair_word(row[2 * q * cs].bits, bits_at(row, 2 * q + 1, cs, kc));
      }
      for (int64_t i = mr; i < kMR; ++i) word[i] = 0;
    }
    out += pairs * kMR;
  }
}

// Packs one kc x NR panel of B (its nr <= NR valid columns start at B): word (q, j) is
// (B(2q, j), B(2q + 1, j)). Columns past nr and the pad of an odd kc are 0.
LOCKSTEP_AVX512_BF16 void pack_b_panel(int64_t nr, int64_t kc, const BFloat16* B, int64_t rs, int64_t cs,
                                       uint32_t* out) {
  const int64_t pairs = ceil_div(kc, 2), full_pairs = kc / 2;
  int64_t q = 0;
  if (cs == 1) {
    // k rows 2q and 2q + 1 loaded whole (32 values each) and interleaved: words 0-15 from the
    // first 16 columns, 16-31 from the rest.
    const __mmask32 valid = first_lanes(nr);
    const __m512i low = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
    for (; q < full_pairs; ++q) {
      const __m512i even = _mm512_maskz_loadu_epi16(valid, B + 2 * q * rs);
      const __m512i odd = _mm512_maskz_loadu_epi16(valid, B + (2 * q + 1) * rs);
      _mm512_storeu_si512(out + q * kNR, _mm512_permutex2var_epi16(even, low, odd));
      _mm512_storeu_si512(out + q * kNR + 16, _mm512_permutex2var_epi16(even, high, odd));
    }
  } else if (rs == 1) {
    // Column j's words are the run at B + j cs: up to 16 pairs of 16 columns at a time.
    for (; q < full_pairs; q += 16) {
      const int64_t n = std::min<int64_t>(16, full_pairs - q);
      for (int64_t j0 = 0; j0 < kNR; j0 += 16) {
        __m512i r[16];
        for (int j = 0; j < 16; ++j)
          r[j] = j0 + j < nr ? load_words(B + (j0 + j) * cs + 2 * q, n) : _mm512_setzero_si512();
        transpose_words(r);
        for (int64_t k = 0; k < n; ++k) _mm512_storeu_si512(out + (q + k) * kNR + j0, r[k]);
      }
    }
    q = full_pairs;
  }
  for (; q < pairs; ++q) {
    uint32_t* word = out + q * kNR;
    const BFloat16* row = B + 2 * q * rs;
    for (int64_t j = 0; j < nr; ++j)
      word[j] = pair_word(row[j * cs].bits, bits_at(B + j * cs, 2 * q + 1, rs, kc));
    for (int64_t j = nr; j < kNR; ++j) word[j] = 0;
  }
}

// The micro-kernel: C = alpha * (A panel) * (B panel) + beta * C for the mr x nr part of one
// MR x NR tile of C (an edge tile is computed whole on the panels' zero padding, and only its
// real part stored, with masked moves) with contiguous rows `ldc` apart, over `pairs` pair words
// of each panel. Step q broadcasts
// each row's A word to 16 lanes and adds its two products with each of the NV B registers.
// The accumulators live in registers for the whole loop; noinline for the reason given at
// gemm.cpp's micro-kernel.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), noinline)) void micro_kernel(
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
  // The same formula as update_tile, 16 lanes at a time, on the first mr rows and nr columns.
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= mr) continue;
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) {
      const int64_t lanes = std::min<int64_t>(16, nr - 16 * v);
      if (lanes <= 0) continue;
      const __mmask16 mask = lanes == 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << lanes) - 1);
      float* out = c + i * ldc + 16 * v;
      __m512 result = _mm512_mul_ps(alpha_v, acc[i][v]);
      if (beta != 0.0f) result = _mm512_add_ps(result, _mm512_mul_ps(beta_v, _mm512_maskz_loadu_ps(mask, out)));
      _mm512_mask_storeu_ps(out, mask, result);
    }
  }
}

// C(mc x nc) = alpha * packed_a * packed_b + beta * C, one MR x NR tile at a time; C's element
// (i, j) is C[i * c_rs + j * c_cs]. A transposed C goes through `ab`.
void macro_kernel(int64_t mc, int64_t nc, int64_t kc, float alpha, const uint32_t* packed_a,
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

// The blocked algorithm, as gemm.cpp's gemm_blocked: B packed once per (jc, pc) block by all
// threads together, then whole row blocks of C handed to the threads. Each element of C is
// summed by one thread, over the K slices in order, and the slices' bounds depend on K alone:
// that is why the thread count never changes a bit of the result.
void gemm_blocked(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_rs,
                  int64_t a_cs, const BFloat16* B, int64_t b_rs, int64_t b_cs, float beta,
                  float* C, int64_t c_rs, int64_t c_cs) {
  const int threads = M * N * K < kSmallProblem ? 1 : gemm_threads();
  // Row blocks of at most MC rows, as many as a multiple of the thread count where M allows.
  int64_t row_blocks = std::min(round_up(ceil_div(M, kMC), threads), ceil_div(M, kMR));
  const int64_t mc_max = round_up(ceil_div(M, row_blocks), kMR);
  row_blocks = ceil_div(M, mc_max);
  // K in slices of about equal length, each but the last an even number of k values so that
  // pairs never straddle two slices.
  const int64_t kc_max = round_up(ceil_div(K, ceil_div(K, kKC)), 2);
  const int64_t pairs_max = kc_max / 2;
  const int64_t nc_max = std::min(kNC, round_up(N, kNR));

  static thread_local std::vector<uint32_t> packed_b_buffer;
  uint32_t* const packed_b = scratch(packed_b_buffer, pairs_max * nc_max);

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    static thread_local std::vector<uint32_t> packed_a_buffer;
    uint32_t* const packed_a = scratch(packed_a_buffer, mc_max * pairs_max);
    for (int64_t jc = 0; jc < N; jc += kNC) {
      const int64_t nc = std::min(kNC, N - jc);
      for (int64_t pc = 0; pc < K; pc += kc_max) {
        const int64_t kc = std::min(kc_max, K - pc);
        const int64_t pairs = ceil_div(kc, 2);
        // Only the first slice of K sees the caller's beta; later slices accumulate.
        const float beta_here = pc == 0 ? beta : 1.0f;
#pragma omp for schedule(static)
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          pack_b_panel(std::min<int64_t>(kNR, nc - jr), kc, B + pc * b_rs + (jc + jr) * b_cs,
                       b_rs, b_cs, packed_b + jr * pairs);
        }
#pragma omp for schedule(dynamic)
        for (int64_t block = 0; block < row_blocks; ++block) {
          const int64_t ic = block * mc_max;
          const int64_t mc = std::min(mc_max, M - ic);
          pack_a(mc, kc, A + ic * a_rs + pc * a_cs, a_rs, a_cs, packed_a);
          macro_kernel(mc, nc, kc, alpha, packed_a, packed_b, beta_here, C + ic * c_rs + jc * c_cs,
                       c_rs, c_cs);
        }
      }
    }
  }
}

// The AVX-512 BF16 path for M, N, K > 0 and alpha != 0. A product much narrower than a tile
// is computed as C^T = B^T A^T, written transposed: the same sums in the same order, with
// less zero padding.
void gemm_avx512_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
                      int64_t a_rs, int64_t a_cs, const BFloat16* B, int64_t b_rs, int64_t b_cs,
                      float beta, float* C, int64_t ldc) {
  const int64_t padded = round_up(M, kMR) * round_up(N, kNR);
  const int64_t padded_transposed = round_up(N, kMR) * round_up(M, kNR);
  if (padded_transposed * 4 < padded * 3) {
    gemm_blocked(N, M, K, alpha, B, b_cs, b_rs, A, a_cs, a_rs, beta, C, 1, ldc);
  } else {
    gemm_blocked(M, N, K, alpha, A, a_rs, a_cs, B, b_rs, b_cs, beta, C, ldc, 1);
  }
}

#pragma GCC diagnostic pop

#endif  // LOCKSTEP_HAVE_AVX512_BF16_KERNEL

// Whether this CPU (and its operating system) runs the AVX-512 BF16 kernel, asked once.
bool cpu_has_avx512_bf16() {
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace

void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t a_row_stride, int64_t a_col_stride, const BFloat16* B,
               int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
               int64_t c_row_stride) {
#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL
  if (cpu_has_avx512_bf16() && M > 0 && N > 0 && K > 0 && alpha != 0.0f) {
    gemm_avx512_bf16(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride,
                     b_col_stride, beta, C, c_row_stride);
    return;
  }
#endif
  gemm_16bit_via_f32(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride,
                    beta, C, c_row_stride);
}

const char* gemm_bf16_path() { return cpu_has_avx512_bf16() ? "avx512_bf16" : "f32 fallback"; }

}  // namespace lockstep::cpu
