// CUDA softmax / log_softmax along a dimension and their backward passes (declared in
// tensor/ops/dispatch/softmax_kernels.h). The CPU reference is tensor/ops/cpu/softmax_kernels.cpp
// (cpu::softmax_kernel and cpu::softmax_backward_kernel); the arithmetic is the same, step for
// step, so the two agree to rounding: the max is subtracted before exponentiating, e^(x - m)
// is computed in the element type (in float for f16 and bf16, whose results are rounded once
// when stored), and every sum is accumulated in double. How threads share the lines is
// described in softmax_lines.cuh.
#include "tensor/ops/dispatch/softmax_kernels.h"

#include <cmath>
#include <type_traits>

#include "core/dispatch.h"
#include "tensor/ops/cuda/launch.cuh"
#include "tensor/ops/cuda/softmax_lines.cuh"

namespace lockstep::cuda {

namespace {

// y = softmax(x) or log_softmax(x) along lines of the contiguous x; one group per line.
template <int kThreads, class T>
__global__ void softmax_lines(const T* x, T* y, Lines lines, bool log) {
  using C = device_opmath_t<T>;
  using Loop = LineLoop<kThreads>;
  const int rank = Loop::rank();
  for (int64_t line = Loop::first(); line < lines.count; line += Loop::step()) {
    const int64_t start = lines.start(line), stride = lines.inner;
    const LineStats<C> st = line_stats<kThreads>(x + start, lines.n, stride, rank);
    // The elementwise pass: each thread writes the elements it scanned.
    if (log) {
      const C log_s = static_cast<C>(std::log(st.sum));
      for (int64_t j = rank; j < lines.n; j += kThreads) {
        const C value = convert<C>(x[start + j * stride]);
        y[start + j * stride] = convert<T>(log_softmax_value(value, st.max, log_s));
      }
    } else {
      const C inv_s = static_cast<C>(1.0 / st.sum);
      for (int64_t j = rank; j < lines.n; j += kThreads) {
        const C value = convert<C>(x[start + j * stride]);
        y[start + j * stride] = convert<T>(std::exp(value - st.max) * inv_s);
      }
    }
  }
}

// dx from dy and the saved output y, along lines of the contiguous dy and y; one group per line.
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - e^y * sum(dy)
template <int kThreads, class T>
__global__ void softmax_backward_lines(const T* dy, const T* y, T* dx, Lines lines, bool log) {
  using C = device_opmath_t<T>;
  using Loop = LineLoop<kThreads>;
  const int rank = Loop::rank();
  for (int64_t line = Loop::first(); line < lines.count; line += Loop::step()) {
    const int64_t start = lines.start(line), stride = lines.inner;
    // The line's one reduction, accumulated in double like the CPU's.
    double dot = 0.0;
    for (int64_t j = rank; j < lines.n; j += kThreads) {
      const int64_t k = start + j * stride;
      const C g = convert<C>(dy[k]), out = convert<C>(y[k]);
      dot += log ? static_cast<double>(g) : static_cast<double>(g) * out;
    }
    const C total = static_cast<C>(group_all_reduce<kThreads>(dot, Sum{}));
    for (int64_t j = rank; j < lines.n; j += kThreads) {
      const int64_t k = start + j * stride;
      const C g = convert<C>(dy[k]), out = convert<C>(y[k]);
      dx[k] = convert<T>(log ? g - std::exp(out) * total : out * (g - total));
    }
  }
}

}  // namespace

void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out) {
  const cudaStream_t stream = stream_for(out.device());
  // Lines are indexed in the contiguous layout (out's); a strided input is copied once.
  const Tensor in = x.contiguous();
  const Lines lines = lines_along(in.shape(), dim);
  dispatch_floating_and_16bit(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    with_threads_per_line(lines.n, lines.inner, [&](auto threads) {
      constexpr int kThreads = decltype(threads)::value;
      softmax_lines<kThreads><<<grid_size(lines.count, LineLoop<kThreads>::kGroupsPerBlock), kBlockSize, 0, stream>>>(
          device_ptr(in.data_ptr<Host>()), device_ptr(out.data_ptr<Host>()), lines, log);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  });
}

void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input) {
  const cudaStream_t stream = stream_for(grad_input.device());
  const Tensor g = grad.contiguous(), y = out.contiguous();
  const Lines lines = lines_along(y.shape(), dim);
  dispatch_floating_and_16bit(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    with_threads_per_line(lines.n, lines.inner, [&](auto threads) {
      constexpr int kThreads = decltype(threads)::value;
      softmax_backward_lines<kThreads><<<grid_size(lines.count, LineLoop<kThreads>::kGroupsPerBlock), kBlockSize, 0,
                                         stream>>>(device_ptr(g.data_ptr<Host>()), device_ptr(y.data_ptr<Host>()),
                                                   device_ptr(grad_input.data_ptr<Host>()), lines, log);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace lockstep::cuda
