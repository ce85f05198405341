// CPU softmax / log_softmax along a dimension, their backward passes, and the cross-entropy
// and nll losses (declared in softmax_kernels.h).
//
// For one line x of n elements (the elements along `dim` that share every other index):
//     softmax(x)_j     = e^(x_j - m) / s                with m = max_k x_k,
//     log_softmax(x)_j = (x_j - m) - log(s)             and  s = sum_k e^(x_k - m).
// Subtracting the max changes nothing mathematically but keeps every exponent <= 0, so e^
// cannot overflow (logits of 1000 are fine), and the largest term is exactly 1, so s >= 1 and
// log(s) is safe. Sums are accumulated in double.
#include "tensor/ops/cpu/softmax_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

namespace {

// y = softmax(x), or log_softmax(x) if `log`, for one line of n elements `stride` apart.
template <class T>
void softmax_line(const T* x, T* y, int64_t n, int64_t stride, bool log) {
  // The max. NaNs need no special care: one NaN makes the sum s NaN, and so the whole line,
  // as in PyTorch.
  T m = x[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, x[j * stride]);
  double s = 0.0;
  if (log) {
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[j * stride] - m);
    const T log_s = static_cast<T>(std::log(s));
    for (int64_t j = 0; j < n; ++j) y[j * stride] = (x[j * stride] - m) - log_s;
  } else {
    // Keep each e^(x_j - m) in y, then normalise in place.
    for (int64_t j = 0; j < n; ++j) {
      const T e = std::exp(x[j * stride] - m);
      y[j * stride] = e;
      s += e;
    }
    const T inv_s = static_cast<T>(1.0 / s);
    for (int64_t j = 0; j < n; ++j) y[j * stride] *= inv_s;
  }
}

// The vector-Jacobian product of softmax_line, from its output y and the gradient dy.
//   softmax:     dy_j/dx_k = y_j ([j == k] - y_k)  =>  dx = y * (dy - sum(dy * y))
//   log_softmax: dy_j/dx_k = [j == k] - e^(y_k)    =>  dx = dy - e^y * sum(dy)
template <class T>
void softmax_backward_line(const T* dy, const T* y, T* dx, int64_t n, int64_t stride, bool log) {
  double dot = 0.0;
  if (log) {
    for (int64_t j = 0; j < n; ++j) dot += dy[j * stride];
    const T total = static_cast<T>(dot);
    for (int64_t j = 0; j < n; ++j) dx[j * stride] = dy[j * stride] - std::exp(y[j * stride]) * total;
  } else {
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(dy[j * stride]) * y[j * stride];
    const T total = static_cast<T>(dot);
    for (int64_t j = 0; j < n; ++j) dx[j * stride] = y[j * stride] * (dy[j * stride] - total);
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
  dispatch_floating(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = in.data_ptr<T>();
    T* py = out.data_ptr<T>();
    for_each_line(in.shape(), dim, [&](int64_t start, int64_t n, int64_t stride) {
      softmax_line(px + start, py + start, n, stride, log);
    });
  });
}

void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input) {
  const Tensor g = grad.contiguous(), y = out.contiguous();
  dispatch_floating(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data_ptr<T>();
    const T* py = y.data_ptr<T>();
    T* pdx = grad_input.data_ptr<T>();
    for_each_line(y.shape(), dim, [&](int64_t start, int64_t n, int64_t stride) {
      softmax_backward_line(pg + start, py + start, pdx + start, n, stride, log);
    });
  });
}

void cross_entropy_kernel(const Tensor& logits, const Tensor& target, const Tensor& log_probs, const Tensor& loss) {
  const Tensor x = logits.contiguous(), t = target.contiguous();
  const int64_t rows = x.size(0), classes = x.size(1);
  dispatch_floating(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    T* lp = log_probs.data_ptr<T>();
    // Each row's loss is -log p(correct class), read off its log_softmax while still in cache.
    // The row losses are added up in order afterwards, so the result does not depend on the
    // number of threads.
    std::vector<double> row_loss(rows);
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelGrain)
    for (int64_t i = 0; i < rows; ++i) {
      softmax_line(px + i * classes, lp + i * classes, classes, 1, true);
      row_loss[i] = -static_cast<double>(lp[i * classes + pt[i]]);
    }
    double total = 0.0;
    for (double l : row_loss) total += l;
    *loss.data_ptr<T>() = static_cast<T>(total / static_cast<double>(rows));
  });
}

void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                   const Tensor& grad_logits) {
  const Tensor lp = log_probs.contiguous(), t = target.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  dispatch_floating(lp.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* plp = lp.data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    T* dx = grad_logits.data_ptr<T>();
    // d(loss)/d(logits[i, j]) = (softmax[i, j] - [j == target[i]]) / N, times the loss's gradient.
    const T scale = static_cast<T>(grad.item() / static_cast<double>(rows));
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelGrain)
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < classes; ++j) dx[i * classes + j] = scale * std::exp(plp[i * classes + j]);
      dx[i * classes + pt[i]] -= scale;
    }
  });
}

void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss) {
  const Tensor lp = log_probs.contiguous(), t = target.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  dispatch_floating(lp.dtype(), "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* plp = lp.data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    double total = 0.0;
    for (int64_t i = 0; i < rows; ++i) total -= static_cast<double>(plp[i * classes + pt[i]]);
    *loss.data_ptr<T>() = static_cast<T>(total / static_cast<double>(rows));
  });
}

void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs) {
  const Tensor t = target.contiguous();
  const int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  dispatch_floating(grad_log_probs.dtype(), "nll_loss backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t* pt = t.data_ptr<int64_t>();
    T* dx = grad_log_probs.data_ptr<T>();
    // Only the picked entry of each row touched the loss, with weight -1/N.
    std::fill_n(dx, rows * classes, T(0));
    const T scale = static_cast<T>(grad.item() / static_cast<double>(rows));
    for (int64_t i = 0; i < rows; ++i) dx[i * classes + pt[i]] = -scale;
  });
}

}  // namespace lockstep::cpu
