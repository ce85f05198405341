/// \file
/// What the two bf16 GEMM kernels share (gemm_bf16.cpp's `vdpbf16ps` kernel and
/// gemm_bf16_amx.cpp's AMX tiles): both multiply-add bf16 values two at a time along K, so both
/// read their operands packed as *pair words*, 32 bits holding (X(2q), X(2q + 1)) with the first
/// value in the low half, and both run the same blocked algorithm around their own micro-kernel.
/// Internal to those files.
///
///   - B is packed into panels of `kPanelColumns` columns: word (q, j) of a panel, at
///     `q * kPanelColumns + j`, is (B(2q, j), B(2q + 1, j)). Sixteen columns fill one 512-bit
///     register, and one AMX tile row.
///   - A is packed by each kernel its own way (`Kernel::pack_a`): the `vdpbf16ps` kernel wants the
///     words of one pair for 8 rows side by side, the AMX kernel each row's words side by side.
///
/// An odd K gets a zero as the second half of its last pair; a kernel that reads K in groups of
/// pairs (AMX: 16) gets zero words up to the next group (`Kernel::padded_pairs`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/half.h"
#include "tensor/ops/cpu/gemm_bf16.h"
#include "tensor/ops/cpu/gemm_blocking.h"

#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 10)
/// Defined where the compiler can build the AVX-512 BF16 and AMX kernels (whatever -march says:
/// they are compiled with function attributes and called only where the CPU has them).
#define LOCKSTEP_HAVE_AVX512_BF16_KERNEL 1
#include <immintrin.h>
#endif

#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL

/// The instruction sets of the functions that pack pair words and of the `vdpbf16ps` kernel.
#define LOCKSTEP_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace lockstep::cpu::gemm_detail {

/// Columns per packed B panel: two registers of 16 pair words.
constexpr int kPanelColumns = 32;

/// Stores `lanes` (1 to 16) values of C at out as alpha * sums + beta * C (C not read where beta
/// is 0, so it may hold NaN): the formula of gemm_blocking.h's update_tile, 16 lanes at a time,
/// with which both bf16 kernels end a tile of C.
LOCKSTEP_AVX512_BF16 inline void store_lanes(float* out, int64_t lanes, __m512 sums, float alpha, float beta) {
  const __mmask16 mask = lanes >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << lanes) - 1);
  __m512 result = _mm512_mul_ps(_mm512_set1_ps(alpha), sums);
  if (beta != 0.0f) {
    result = _mm512_add_ps(result, _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, out)));
  }
  _mm512_mask_storeu_ps(out, mask, result);
}

/// Packs one kc x kPanelColumns panel of B (its nr <= kPanelColumns valid columns start at B,
/// element (k, j) at `B[k * rs + j * cs]`) into `padded_pairs` rows of pair words at out.
/// Columns past nr, the pad of an odd kc and the rows past ceil(kc / 2) are 0.
void pack_b_pairs(int64_t nr, int64_t kc, int64_t padded_pairs, const BFloat16* B, int64_t rs,
                  int64_t cs, uint32_t* out);

/// Packs an mc x kc block of A (element (i, k) at `A[i * rs + k * cs]`) as `padded_rows` rows of
/// `padded_pairs` pair words each, side by side: word (i, q) is at `i * padded_pairs + q`. Rows
/// past mc, the pad of an odd kc and the words past ceil(kc / 2) are 0. This is the AMX kernel's
/// layout: a tile of A is 16 rows of 16 such words.
void pack_a_pair_rows(int64_t mc, int64_t kc, int64_t padded_rows, int64_t padded_pairs, const BFloat16* A,
                      int64_t rs, int64_t cs, uint32_t* out);

/// Rows per panel of `pack_a_pair_columns`.
constexpr int kPairColumnRows = 8;

/// Packs an mc x kc block of A into panels of kPairColumnRows rows with the words of one pair
/// side by side: word (q, i) of a panel is at `q * kPairColumnRows + i`. Rows past mc and the pad
/// of an odd kc are 0. This is the `vdpbf16ps` kernel's layout: it broadcasts one word at a time.
void pack_a_pair_columns(int64_t mc, int64_t kc, const BFloat16* A, int64_t rs, int64_t cs, uint32_t* out);

/// The blocked algorithm of gemm.cpp's gemm_blocked, around the micro-kernel of `Kernel`: B
/// packed once per (jc, pc) block by all threads together, then whole row blocks of C handed to
/// the threads. Each element of C is summed by one thread, over the K slices in order, and the
/// slices' bounds depend on K alone: that is why the thread count never changes a bit of the
/// result. C's element (i, j) is `C[i * c_rs + j * c_cs]`. With `prepacked` (A packed by
/// prepack_pairs<Kernel>), the row blocks read it instead of packing A.
///
/// `Kernel` provides the block sizes kMR (rows per A panel), kMC, kKC (k values per slice, even)
/// and kNC (a multiple of kPanelColumns); `padded_pairs(pairs)`, the pair rows a packed panel
/// holds for a slice of `pairs` pairs; `pack_a(mc, kc, padded_pairs, A, rs, cs, out)`; and
/// `multiply(mc, nc, kc, alpha, packed_a, packed_b, beta, C, c_rs, c_cs)`, which computes the
/// mc x nc block of C from the packed panels.
/// The k values per slice of K: about equal slices of at most `Kernel::kKC`, each but the last an
/// even number so that pairs never straddle two slices. A function of K alone.
template <class Kernel>
int64_t slice_length(int64_t K) {
  return round_up(ceil_div(K, ceil_div(K, Kernel::kKC)), 2);
}

/// Packs the (M, K) operand A for `Kernel` once, into `packed`'s rows, padded_max and words:
/// slice s of K starts at word `s * rows * padded_max` and holds `Kernel::pack_a` of all M rows
/// for that slice, so the rows of a row block starting at row ic are contiguous from
/// `ic * padded` words into their slice, as a block packed on its own would be.
template <class Kernel>
void prepack_pairs(int64_t M, int64_t K, const BFloat16* A, int64_t rs, int64_t cs, PackedBf16A& packed) {
  const int64_t kc_max = slice_length<Kernel>(K);
  packed.rows = round_up(M, Kernel::kMR);
  packed.padded_max = Kernel::padded_pairs(kc_max / 2);
  packed.words.resize(ceil_div(K, kc_max) * packed.rows * packed.padded_max);
  for (int64_t pc = 0, s = 0; pc < K; pc += kc_max, ++s) {
    const int64_t kc = std::min(kc_max, K - pc);
    Kernel::pack_a(M, kc, Kernel::padded_pairs(ceil_div(kc, 2)), A + pc * cs, rs, cs,
                   packed.words.data() + s * packed.rows * packed.padded_max);
  }
}

template <class Kernel>
void gemm_pairs_blocked(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_rs,
                        int64_t a_cs, const BFloat16* B, int64_t b_rs, int64_t b_cs, float beta, float* C,
                        int64_t c_rs, int64_t c_cs, const PackedBf16A* prepacked = nullptr) {
  // Below this many multiply-adds waking the other threads costs more than it saves.
  constexpr int64_t kSmallProblem = 32 * 1024;
  const int threads = M * N * K < kSmallProblem ? 1 : gemm_threads();
  // Row blocks of at most MC rows, as many as a multiple of the thread count where M allows.
  int64_t row_blocks = std::min(round_up(ceil_div(M, Kernel::kMC), threads), ceil_div(M, Kernel::kMR));
  const int64_t mc_max = round_up(ceil_div(M, row_blocks), Kernel::kMR);
  row_blocks = ceil_div(M, mc_max);
  const int64_t kc_max = slice_length<Kernel>(K);
  const int64_t padded_max = Kernel::padded_pairs(kc_max / 2);
  const int64_t nc_max = std::min(Kernel::kNC, round_up(N, kPanelColumns));

  static thread_local std::vector<uint32_t> packed_b_buffer;
  uint32_t* const packed_b = scratch(packed_b_buffer, padded_max * nc_max);

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    static thread_local std::vector<uint32_t> packed_a_buffer;
    uint32_t* const packed_a = scratch(packed_a_buffer, prepacked ? 0 : mc_max * padded_max);
    for (int64_t jc = 0; jc < N; jc += Kernel::kNC) {
      const int64_t nc = std::min(Kernel::kNC, N - jc);
      for (int64_t pc = 0, slice = 0; pc < K; pc += kc_max, ++slice) {
        const int64_t kc = std::min(kc_max, K - pc);
        const int64_t padded = Kernel::padded_pairs(ceil_div(kc, 2));
        // Only the first slice of K sees the caller's beta; later slices accumulate.
        const float beta_here = pc == 0 ? beta : 1.0f;
#pragma omp for schedule(static)
        for (int64_t jr = 0; jr < nc; jr += kPanelColumns) {
          pack_b_pairs(std::min<int64_t>(kPanelColumns, nc - jr), kc, padded, B + pc * b_rs + (jc + jr) * b_cs,
                       b_rs, b_cs, packed_b + jr * padded);
        }
#pragma omp for schedule(dynamic)
        for (int64_t block = 0; block < row_blocks; ++block) {
          const int64_t ic = block * mc_max;
          const int64_t mc = std::min(mc_max, M - ic);
          const uint32_t* block_a = packed_a;
          if (prepacked) {
            block_a = prepacked->words.data() + slice * prepacked->rows * prepacked->padded_max + ic * padded;
          } else {
            Kernel::pack_a(mc, kc, padded, A + ic * a_rs + pc * a_cs, a_rs, a_cs, packed_a);
          }
          Kernel::multiply(mc, nc, kc, alpha, block_a, packed_b, beta_here, C + ic * c_rs + jc * c_cs, c_rs,
                           c_cs);
        }
      }
    }
  }
}

/// Whether the `Kernel` path computes an M x N product as C^T = B^T A^T, written transposed: a
/// product much narrower than a tile, whose sums are the same in the same order, with less zero
/// padding.
template <class Kernel>
bool computes_transposed(int64_t M, int64_t N) {
  const int64_t padded = round_up(M, Kernel::kMR) * round_up(N, kPanelColumns);
  const int64_t padded_transposed = round_up(N, Kernel::kMR) * round_up(M, kPanelColumns);
  return padded_transposed * 4 < padded * 3;
}

/// The `Kernel` path for M, N, K > 0 and alpha != 0.
template <class Kernel>
void gemm_pairs(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_rs, int64_t a_cs,
                const BFloat16* B, int64_t b_rs, int64_t b_cs, float beta, float* C, int64_t ldc) {
  if (computes_transposed<Kernel>(M, N)) {
    gemm_pairs_blocked<Kernel>(N, M, K, alpha, B, b_cs, b_rs, A, a_cs, a_rs, beta, C, 1, ldc);
  } else {
    gemm_pairs_blocked<Kernel>(M, N, K, alpha, A, a_rs, a_cs, B, b_rs, b_cs, beta, C, ldc, 1);
  }
}

/// gemm_pairs with A prepacked (prepack_pairs on A's pointer and strides, which it also reads):
/// where gemm_pairs would compute C^T it does too, from A itself, so that its results are
/// gemm_pairs', bit for bit.
template <class Kernel>
void gemm_pairs_prepacked(const PackedBf16A& prepacked, int64_t M, int64_t N, int64_t K, float alpha,
                          const BFloat16* A, int64_t a_rs, int64_t a_cs, const BFloat16* B, int64_t b_rs,
                          int64_t b_cs, float beta, float* C, int64_t ldc) {
  if (computes_transposed<Kernel>(M, N)) {
    gemm_pairs_blocked<Kernel>(N, M, K, alpha, B, b_cs, b_rs, A, a_cs, a_rs, beta, C, 1, ldc);
  } else {
    gemm_pairs_blocked<Kernel>(M, N, K, alpha, A, a_rs, a_cs, B, b_rs, b_cs, beta, C, ldc, 1, &prepacked);
  }
}

}  // namespace lockstep::cpu::gemm_detail

#endif  // LOCKSTEP_HAVE_AVX512_BF16_KERNEL
