// CPU max pooling over (N, C, H, W). Every (n, c) plane is independent: its outputs read only
// its own inputs and its gradients land only in its own input gradient, so the kernels
// parallelise over the N * C planes without atomics. f16 and bf16 values are compared as
// floats, and their gradients summed in float.
#include "tensor/ops/cpu/pool_kernels.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"
#include "tensor/ops/max_rule.h"

namespace lockstep::cpu {

namespace {

// One plane of the most common pooling, 2x2 windows at stride 2 without padding (the CNN's),
// with nothing left to compute at run time: each output compares four known neighbours, as
// selects rather than branches (which one wins is data, and a branch on it would be
// mispredicted about as often as not); several times faster than the general loop below
// (tests/bench/README.md). The rule is the general one, pool_max_beats in row-major order.
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
        max_pool_2x2_plane(plane, W, OH, OW, o + p * OH * OW, idx + p * OH * OW);
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

void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, const Tensor& grad_input) {
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
