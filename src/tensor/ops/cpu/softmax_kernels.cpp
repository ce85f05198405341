// CPU softmax / log_softmax along a dimension and their backward passes (declared in
// softmax_kernels.h).
//
// For one line x of n elements (the elements along `dim` that share every other index):
//     softmax(x)_j     = e^(x_j - m) / s                with m = max_k x_k,
//     log_softmax(x)_j = (x_j - m) - log(s)             and  s = sum_k e^(x_k - m).
// Subtracting the max changes nothing mathematically but keeps every exponent <= 0, so e^
// cannot overflow (logits of 1000 are fine), and the largest term is exactly 1, so s >= 1 and
// log(s) is safe. Sums are accumulated in double, and f16 and bf16 lines are computed in float,
// each output rounded to 16 bits once.
#include "tensor/ops/dispatch/softmax_kernels.h"

#include <cmath>

#include "core/dispatch.h"
#include "tensor/ops/cpu/softmax_line.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

namespace {

// The vector-Jacobian product of softmax_line, from its output y and the gradient dy.
//   softmax:     dy_j/dx_k = y_j ([j == k] - y_k)  =>  dx = y * (dy - sum(dy * y))
//   log_softmax: dy_j/dx_k = [j == k] - e^(y_k)    =>  dx = dy - e^y * sum(dy)
template <class T>
void softmax_backward_line(const T* dy, const T* y, T* dx, int64_t n, int64_t stride, bool log) {
  using C = opmath_t<T>;
  double dot = 0.0;
  if (log) {
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(dy[j * stride]);
    const C total = static_cast<C>(dot);
    for (int64_t j = 0; j < n; ++j) {
      const C d = static_cast<C>(dy[j * stride]), e = std::exp(static_cast<C>(y[j * stride]));
      dx[j * stride] = static_cast<T>(d - e * total);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(dy[j * stride]) * static_cast<double>(y[j * stride]);
    const C total = static_cast<C>(dot);
    for (int64_t j = 0; j < n; ++j) {
      const C d = static_cast<C>(dy[j * stride]), p = static_cast<C>(y[j * stride]);
      dx[j * stride] = static_cast<T>(p * (d - total));
    }
  }
}

// Calls line(start, n, stride) for every line along `dim` of a contiguous tensor of `shape`:
// line l = (o, i) of the (outer, n, inner) view starts at element o * n * inner + i, and its
// elements are inner apart. Lines are independent, so they run in parallel when large enough.
template <class LineFn>
void for_each_line(const Shape& shape, int64_t dim, LineFn line) {
  // A 0-d tensor is one line of one element.
  if (shape.empty()) return line(0, 1, 1);
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  const int64_t n = shape[dim];
  const int64_t inner = shape_numel(Shape(shape.begin() + dim + 1, shape.end()));
  const int64_t lines = numel / n;
#pragma omp parallel for schedule(static) if (numel >= kParallelGrain && lines > 1)
  for (int64_t l = 0; l < lines; ++l) line(l / inner * n * inner + l % inner, n, inner);
}

}  // namespace

void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out) {
  const Tensor in = x.contiguous();
  dispatch_floating_and_16bit(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = in.data_ptr<T>();
    T* py = out.data_ptr<T>();
    for_each_line(in.shape(), dim, [&](int64_t start, int64_t n, int64_t stride) {
      if (log) {
        log_softmax_line(px + start, py + start, n, stride);
      } else {
        softmax_line(px + start, py + start, n, stride);
      }
    });
  });
}

void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input) {
  const Tensor g = grad.contiguous(), y = out.contiguous();
  dispatch_floating_and_16bit(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data_ptr<T>();
    const T* py = y.data_ptr<T>();
    T* pdx = grad_input.data_ptr<T>();
    for_each_line(y.shape(), dim, [&](int64_t start, int64_t n, int64_t stride) {
      softmax_backward_line(pg + start, py + start, pdx + start, n, stride, log);
    });
  });
}

}  // namespace lockstep::cpu
