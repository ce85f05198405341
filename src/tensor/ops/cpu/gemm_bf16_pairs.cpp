// Packing bf16 operands into pair words, for both bf16 GEMM kernels (the layouts are in
// gemm_bf16_pairs.h).
#include "tensor/ops/cpu/gemm_bf16_pairs.h"

#ifdef LOCKSTEP_HAVE_AVX512_BF16_KERNEL

namespace lockstep::cpu::gemm_detail {

// GCC 12 warns, wrongly, that the "undefined" vector that its own headers pass to several
// AVX-512 intrinsics (unpacks, lane shuffles) is used uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

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

}  // namespace

LOCKSTEP_AVX512_BF16 void pack_a_pair_columns(int64_t mc, int64_t kc, const BFloat16* A, int64_t rs, int64_t cs,
                                              uint32_t* out) {
  constexpr int kMR = kPairColumnRows;
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

LOCKSTEP_AVX512_BF16 void pack_b_pairs(int64_t nr, int64_t kc, int64_t padded_pairs, const BFloat16* B,
                                      int64_t rs, int64_t cs, uint32_t* out) {
  constexpr int kNR = kPanelColumns;
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
  std::fill(out + pairs * kNR, out + padded_pairs * kNR, 0u);
}

// The rows layout is a copy of each row's words where the K stride is 1. Where the row stride is
// 1 instead, the two k rows of a pair hold 16 rows' values side by side: interleaved, they give
// one pair's words for 16 rows, and 16 pairs of them transposed give 16 rows' words.
LOCKSTEP_AVX512_BF16 void pack_a_pair_rows(int64_t mc, int64_t kc, int64_t padded_rows, int64_t padded_pairs,
                                           const BFloat16* A, int64_t rs, int64_t cs, uint32_t* out) {
  const int64_t pairs = ceil_div(kc, 2), full_pairs = kc / 2;
  int64_t done = 0;  // rows [0, mc) hold their words [0, done) after the fast paths
  if (cs == 1) {
    for (int64_t i = 0; i < mc; ++i)
      for (int64_t q = 0; q < full_pairs; q += 16)
        _mm512_storeu_si512(out + i * padded_pairs + q,
                            load_words(A + i * rs + 2 * q, std::min<int64_t>(16, full_pairs - q)));
    done = full_pairs;
  } else if (rs == 1) {
    for (int64_t i0 = 0; i0 < mc; i0 += 16) {
      const int64_t rows = std::min<int64_t>(16, mc - i0);
      const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
      for (int64_t q0 = 0; q0 < full_pairs; q0 += 16) {
        // r[k]: pair q0 + k's words of rows i0 .. i0 + 15; after the transpose r[i] is row i0 + i's.
        __m512i r[16];
        for (int64_t k = 0; k < 16; ++k) {
          const int64_t q = q0 + k;
          if (q >= full_pairs) {
            r[k] = _mm512_setzero_si512();
            continue;
          }
          const __m512i even = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(valid, A + 2 * q * cs + i0));
          const __m512i odd = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(valid, A + (2 * q + 1) * cs + i0));
          r[k] = _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
        }
        transpose_words(r);
        const __mmask16 words = static_cast<__mmask16>((1u << std::min<int64_t>(16, full_pairs - q0)) - 1);
        for (int64_t i = 0; i < rows; ++i) _mm512_mask_storeu_epi32(out + (i0 + i) * padded_pairs + q0, words, r[i]);
      }
    }
    done = full_pairs;
  }
  // The rest one word at a time: other strides, the odd last pair, the zero padding.
  for (int64_t i = 0; i < padded_rows; ++i) {
    uint32_t* row = out + i * padded_pairs;
    const BFloat16* from = A + i * rs;
    for (int64_t q = i < mc ? done : 0; q < padded_pairs; ++q)
      row[q] = i < mc && q < pairs ? pair_word(from[2 * q * cs].bits, bits_at(from, 2 * q + 1, cs, kc)) : 0u;
  }
}

#pragma GCC diagnostic pop

}  // namespace lockstep::cpu::gemm_detail

#endif  // LOCKSTEP_HAVE_AVX512_BF16_KERNEL
