// conv2d as one dense product over the batch, for images no larger than the filter.
// The operator D and the three products are in conv_dense.h.
#include "tensor/ops/cpu/conv_dense.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "tensor/ops/cpu/gemm_sums.h"

namespace lockstep::cpu {

namespace {

// The filter tap (i, j) that joins input pixel p to output pixel o, as i * kW + j, or -1 where
// p lies outside the filter placed at o.
int64_t tap_of(const Conv2dGeometry& g, int64_t o, int64_t p) {
  const int64_t i = p / g.width - (o / g.out_w) * g.stride + g.padding;
  const int64_t j = p % g.width - (o % g.out_w) * g.stride + g.padding;
  return i >= 0 && i < g.kernel_h && j >= 0 && j < g.kernel_w ? i * g.kernel_w + j : -1;
}

// For every (output pixel o, input pixel p), tap_of(o, p): (out_pixels, H * W).
std::vector<int64_t> tap_table(const Conv2dGeometry& g) {
  const int64_t pixels_in = g.height * g.width, pixels_out = g.out_pixels();
  std::vector<int64_t> taps(static_cast<size_t>(pixels_out * pixels_in));
  for (int64_t o = 0; o < pixels_out; ++o)
    for (int64_t p = 0; p < pixels_in; ++p) taps[o * pixels_in + p] = tap_of(g, o, p);
  return taps;
}

// D: (C_out * out_pixels, C_in * H * W), from w: (C_out, C_in, kH, kW).
template <class T>
std::vector<T> dense_operator(const T* w, int64_t out_channels, const Conv2dGeometry& g,
                              const std::vector<int64_t>& taps) {
  const int64_t pixels_in = g.height * g.width, pixels_out = g.out_pixels(), taps_per_filter = g.kernel_h * g.kernel_w;
  const int64_t row = g.channels * pixels_in;
  std::vector<T> d(static_cast<size_t>(out_channels * pixels_out * row));
  // Entry (co, o; ci, p) for every input channel at once: the channels are the inner loop, so
  // that a 1 x 1 filter over 1 x 1 images (D = W) is a plain copy.
  for (int64_t co = 0; co < out_channels; ++co) {
    for (int64_t o = 0; o < pixels_out; ++o) {
      T* d_row = d.data() + (co * pixels_out + o) * row;
      for (int64_t p = 0; p < pixels_in; ++p) {
        const int64_t tap = taps[o * pixels_in + p];
        const T* filter = w + co * g.channels * taps_per_filter + tap;
        for (int64_t ci = 0; ci < g.channels; ++ci)
          d_row[ci * pixels_in + p] = tap >= 0 ? filter[ci * taps_per_filter] : T(0);
      }
    }
  }
  return d;
}

// Where sums in Acc go: `out` itself when it has that type, else `buffer`, sized for n values.
template <class Acc, class T>
Acc* sums_into(T* out, int64_t n, std::vector<Acc>& buffer) {
  if constexpr (std::is_same_v<T, Acc>) {
    return out;
  } else {
    buffer.resize(static_cast<size_t>(n));
    return buffer.data();
  }
}

// out = the sums, rounded once where out has fewer bits than Acc.
template <class T, class Acc>
void store_sums(const Acc* sums, int64_t n, T* out) {
  if constexpr (!std::is_same_v<T, Acc>) {
    for (int64_t k = 0; k < n; ++k) out[k] = static_cast<T>(sums[k]);
  }
}

}  // namespace

bool conv2d_runs_dense(const Conv2dGeometry& g) { return g.height * g.width <= g.kernel_h * g.kernel_w; }

void conv2d_dense_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                          const Conv2dGeometry& g) {
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t in_row = g.image_size(), out_row = out_channels * g.out_pixels();
  dispatch_floating_and_16bit(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;
    const std::vector<T> d = dense_operator(weight.data_ptr<T>(), out_channels, g, tap_table(g));
    std::vector<Acc> buffer;
    Acc* y = sums_into(out.data_ptr<T>(), batch * out_row, buffer);  // y: (N, C_out * out_pixels)
    // Each output channel starts as its bias; the GEMM adds x . D^T onto it (beta = 1).
    if (bias.defined()) {
      const T* b = bias.data_ptr<T>();
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t co = 0; co < out_channels; ++co)
          std::fill_n(y + n * out_row + co * g.out_pixels(), g.out_pixels(), static_cast<Acc>(b[co]));
    }
    // x: (N, C_in * H * W) as it lies; D^T is D read with its strides swapped.
    gemm_into<T, Acc>(batch, out_row, in_row, input.data_ptr<T>(), in_row, 1, d.data(), 1, in_row,
                      Acc(bias.defined() ? 1 : 0), y, out_row);
    store_sums(y, batch * out_row, out.data_ptr<T>());
  });
}

void conv2d_dense_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                           const Tensor& grad_input, const Tensor& grad_weight, const Conv2dGeometry& g) {
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t pixels_in = g.height * g.width, pixels_out = g.out_pixels();
  const int64_t in_row = g.image_size(), out_row = out_channels * pixels_out;
  const std::vector<int64_t> taps = tap_table(g);
  dispatch_floating_and_16bit(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;
    const T* dy = grad_out.data_ptr<T>();  // dy: (N, C_out * out_pixels)
    std::vector<Acc> buffer;
    if (grad_input.defined()) {
      // dx (N, C_in * H * W) = dy . D.
      const std::vector<T> d = dense_operator(weight.data_ptr<T>(), out_channels, g, taps);
      Acc* dx = sums_into(grad_input.data_ptr<T>(), batch * in_row, buffer);
      gemm_into<T, Acc>(batch, in_row, out_row, dy, out_row, 1, d.data(), in_row, 1, Acc(0), dx, in_row);
      store_sums(dx, batch * in_row, grad_input.data_ptr<T>());
    }
    if (grad_weight.defined()) {
      // dD (C_out * out_pixels, C_in * H * W) = dy^T . x: the batch summed inside one GEMM.
      std::vector<Acc> dd(static_cast<size_t>(out_row * in_row));
      gemm_into<T, Acc>(out_row, in_row, batch, dy, 1, out_row, input.data_ptr<T>(), in_row, 1, Acc(0), dd.data(),
                        in_row);
      // Each tap of each filter gathers the entries of dD it made, o ascending, then p; the
      // input channels are the inner loop, as in dense_operator.
      const int64_t taps_per_filter = g.kernel_h * g.kernel_w, weight_size = grad_weight.numel();
      std::vector<Acc> dw_buffer;
      Acc* dw = sums_into(grad_weight.data_ptr<T>(), weight_size, dw_buffer);  // (C_out, C_in, kH, kW)
      std::fill_n(dw, weight_size, Acc(0));
      for (int64_t co = 0; co < out_channels; ++co) {
        for (int64_t o = 0; o < pixels_out; ++o) {
          const Acc* dd_row = dd.data() + (co * pixels_out + o) * in_row;
          for (int64_t p = 0; p < pixels_in; ++p) {
            const int64_t tap = taps[o * pixels_in + p];
            if (tap < 0) continue;
            Acc* filter = dw + co * g.channels * taps_per_filter + tap;
            for (int64_t ci = 0; ci < g.channels; ++ci) filter[ci * taps_per_filter] += dd_row[ci * pixels_in + p];
          }
        }
      }
      store_sums(dw, weight_size, grad_weight.data_ptr<T>());
    }
  });
}

}  // namespace lockstep::cpu
