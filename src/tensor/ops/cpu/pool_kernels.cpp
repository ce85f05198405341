// CPU max pooling over (N, C, H, W). Every (n, c) plane is independent: its outputs read only
// its own inputs and its gradients land only in its own input gradient, so the kernels
// parallelise over the N * C planes without atomics. f16 and bf16 values are compared as
// floats, and their gradients summed in float.
#include "tensor/ops/dispatch/pool_kernels.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"
#include "tensor/ops/rules/max_rule.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace lockstep::cpu {

namespace {

// One plane of the most common pooling, 2x2 windows at stride 2 without padding (the CNN's),
// with nothing left to compute at run time: each output compares four known neighbours, as
// selects rather than branches (which one wins is data, and a branch on it would be
// mispredicted about as often as not); tests/bench/README.md compares it with the general loop
// below. The rule is the general one, pool_max_beats in row-major order.
template <class T>
void max_pool_2x2_plane(const T* plane, int64_t W, int64_t OH, int64_t OW, T* out, int64_t* out_index) {
  using C = opmath_t<T>;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t top = 2 * oh * W;  // the window's first row, as an offset into the plane
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t window[4] = {top + 2 * ow, top + 2 * ow + 1, top + W + 2 * ow, top + W + 2 * ow + 1};
      C best = static_cast<C>(plane[window[0]]);
      int64_t best_index = window[0];
      for (int j = 1; j < 4; ++j) {
        const C v = static_cast<C>(plane[window[j]]);
        const bool wins = pool_max_beats(v, best);
        best = wins ? v : best;
        best_index = wins ? window[j] : best_index;
      }
      out[oh * OW + ow] = static_cast<T>(best);  // exact: best is one of the plane's values
      out_index[oh * OW + ow] = best_index;
    }
  }
}

#ifdef __AVX512F__

// GCC 12 warns, wrongly, that the "undefined" vector that its own headers pass to several
// AVX-512 intrinsics (shifts, widening, extracts) may be used uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The 2x2, stride-2 plane with AVX-512, for f32 and bf16: the same winners by the same rule as
// max_pool_2x2_plane, 16 outputs at a time. The compiler does not vectorise the scalar loop
// (strided pairs, a select chain), which in bf16 also widens every value on its own. Here 16
// windows of an output row cost two (f32) or one (bf16) load per input row and a few compares
// and blends (tests/bench/README.md has the timings).
//
// load_pairs reads 2 * count values from an input row (count <= 16) and splits them into the
// windows' left columns (`even`, the values at 2 ow) and right columns (`odd`, at 2 ow + 1) as
// 16 floats each; lanes past count read nothing and hold 0. store_max writes the 16 maxima.
void load_pairs(const float* row, int count, __m512& even, __m512& odd) {
  // 32 values in two registers; vpermt2ps gathers the even and the odd positions of both.
  const __mmask16 lo = static_cast<__mmask16>((1u << std::min(2 * count, 16)) - 1);
  const __mmask16 hi = static_cast<__mmask16>((1u << std::max(2 * count - 16, 0)) - 1);
  const __m512 a = _mm512_maskz_loadu_ps(lo, row);
  const __m512 b = _mm512_maskz_loadu_ps(hi, row + 16);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  even = _mm512_permutex2var_ps(a, evens, b);
  odd = _mm512_permutex2var_ps(a, odds, b);
}

void load_pairs(const BFloat16* row, int count, __m512& even, __m512& odd) {
  // 32 bf16 values fill one register, and each 32-bit lane already holds one window's pair:
  // the even value in its low half and the odd one in its high half. A bf16 value is the top
  // half of the float with the same value, so shifting and masking widen both exactly.
  const __m512i pairs = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << count) - 1), row);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

void store_max(__m512 best, int count, float* out) {
  _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << count) - 1), best);
}

void store_max(__m512 best, int count, BFloat16* out) {
  // Each maximum is one of the plane's bf16 values, so its top half is that value; a NaN gets
  // its quiet bit set, as the conversion of one value (float_to_bfloat16_bits) does.
  const __mmask16 nan = _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q);
  __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(best), 16);
  bits = _mm512_mask_or_epi32(bits, nan, bits, _mm512_set1_epi32(0x40));
  _mm512_mask_cvtepi32_storeu_epi16(out, static_cast<__mmask16>((1u << count) - 1), bits);
}

template <class T>
void max_pool_2x2_plane_avx512(const T* plane, int64_t W, int64_t OH, int64_t OW, T* out, int64_t* out_index) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* top = plane + 2 * oh * W;  // the windows' first row
    for (int64_t ow = 0; ow < OW; ow += 16) {
      const int count = static_cast<int>(std::min<int64_t>(16, OW - ow));
      // The four candidates of each window, in row-major order.
      __m512 candidate[4];
      load_pairs(top + 2 * ow, count, candidate[0], candidate[1]);
      load_pairs(top + W + 2 * ow, count, candidate[2], candidate[3]);
      // The winner's index in the plane: the window's first element (top + 2 ow), plus 1 for a
      // right column and W for the lower row. Indices are formed in 32 bits (the caller checks
      // that a plane fits) and widened on the store.
      const __m512i first = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(2 * (oh * W + ow))),
                                             _mm512_slli_epi32(lane, 1));
      const int offset[4] = {0, 1, static_cast<int>(W), static_cast<int>(W) + 1};
      __m512 best = candidate[0];
      __m512i index = first;
      for (int j = 1; j < 4; ++j) {
        // pool_max_beats, lane by lane: larger, or a NaN.
        const __mmask16 wins = _mm512_cmp_ps_mask(candidate[j], best, _CMP_GT_OQ) |
                               _mm512_cmp_ps_mask(candidate[j], candidate[j], _CMP_UNORD_Q);
        best = _mm512_mask_blend_ps(wins, best, candidate[j]);
        index = _mm512_mask_add_epi32(index, wins, first, _mm512_set1_epi32(offset[j]));
      }
      store_max(best, count, out + oh * OW + ow);
      int64_t* idx = out_index + oh * OW + ow;
      _mm512_mask_storeu_epi64(idx, static_cast<__mmask8>((1u << std::min(count, 8)) - 1),
                               _mm512_cvtepi32_epi64(_mm512_castsi512_si256(index)));
      if (count > 8) {
        _mm512_mask_storeu_epi64(idx + 8, static_cast<__mmask8>((1u << (count - 8)) - 1),
                                 _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(index, 1)));
      }
    }
  }
}

#pragma GCC diagnostic pop

#endif  // __AVX512F__

// The 2x2, stride-2 plane: with AVX-512 for the types it has a loader for, else the portable loop.
template <class T>
void max_pool_2x2(const T* plane, [[maybe_unused]] int64_t H, int64_t W, int64_t OH, int64_t OW, T* out,
                  int64_t* out_index) {
#ifdef __AVX512F__
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    if (H * W <= std::numeric_limits<int32_t>::max()) {
      max_pool_2x2_plane_avx512(plane, W, OH, OW, out, out_index);
      return;
    }
  }
#endif
  max_pool_2x2_plane(plane, W, OH, OW, out, out_index);
}

}  // namespace

void max_pool2d_kernel(const Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding, const Tensor& out,
                       const Tensor& indices) {
  const Tensor x = input.contiguous();  // x: (N, C, H, W)
  const int64_t planes = x.size(0) * x.size(1);
  const int64_t H = x.size(2), W = x.size(3);
  const int64_t OH = out.size(2), OW = out.size(3);
  int64_t* idx = indices.data_ptr<int64_t>();  // idx: (N, C, OH, OW)

  dispatch_floating_and_16bit(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();  // o: (N, C, OH, OW)

    const bool two_by_two = kernel_size == 2 && stride == 2 && padding == 0;
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      const T* plane = in + p * H * W;
      if (two_by_two) {
        max_pool_2x2(plane, H, W, OH, OW, o + p * OH * OW, idx + p * OH * OW);
        continue;
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        // The window's rows, clipped to the input: rows in the padding hold -inf and can
        // never win, so they are simply skipped.
        const int64_t h0 = std::max<int64_t>(oh * stride - padding, 0);
        const int64_t h1 = std::min<int64_t>(oh * stride - padding + kernel_size, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * stride - padding, 0);
          const int64_t w1 = std::min<int64_t>(ow * stride - padding + kernel_size, W);
          // Scan row-major, so the first of equal maxima wins; a NaN always wins, so it
          // propagates instead of vanishing. Both exactly as PyTorch's CPU kernel.
          C best = -std::numeric_limits<C>::infinity();
          int64_t best_index = h0 * W + w0;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w) {
              const C v = static_cast<C>(plane[h * W + w]);
              if (pool_max_beats(v, best)) {
                best = v;
                best_index = h * W + w;
              }
            }
          }
          o[(p * OH + oh) * OW + ow] = static_cast<T>(best);
          idx[(p * OH + oh) * OW + ow] = best_index;
        }
      }
    }
  });
}

void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, int64_t /*kernel_size*/,
                                int64_t /*stride*/, int64_t /*padding*/, const Tensor& grad_input) {
  const Tensor g = grad_output.contiguous();  // g: (N, C, OH, OW)
  const int64_t planes = g.size(0) * g.size(1);
  const int64_t out_plane = g.size(2) * g.size(3);
  const int64_t in_plane = grad_input.size(2) * grad_input.size(3);
  const int64_t* idx = indices.data_ptr<int64_t>();

  dispatch_floating_and_16bit(g.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;
    const T* go = g.data_ptr<T>();
    T* gi = grad_input.data_ptr<T>();  // gi: (N, C, H, W)
    // An f32 or f64 plane collects its shares in place; a 16-bit one would round at every
    // share, so it collects them in a float plane of the thread's own and is rounded once.
    constexpr bool in_place = std::is_same_v<T, C>;

    // Each output's gradient goes to the input element that was its maximum; where windows
    // overlap one input may have won several times and collects every share. Each plane is
    // zeroed just before, while it is in cache, rather than all of grad_input in a pass of its own.
#pragma omp parallel if (grad_input.numel() >= kParallelGrain)
    {
      std::vector<C> scratch(in_place ? 0 : in_plane);  // scratch: (H, W)
#pragma omp for schedule(static)
      for (int64_t p = 0; p < planes; ++p) {
        C* acc;
        if constexpr (in_place) {
          acc = gi + p * in_plane;
        } else {
          acc = scratch.data();
        }
        std::fill(acc, acc + in_plane, C(0));
        for (int64_t j = 0; j < out_plane; ++j) acc[idx[p * out_plane + j]] += static_cast<C>(go[p * out_plane + j]);
        if constexpr (!in_place) std::copy(acc, acc + in_plane, gi + p * in_plane);
      }
    }
  });
}

}  // namespace lockstep::cpu
