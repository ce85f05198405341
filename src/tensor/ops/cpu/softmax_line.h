/// \file
/// One line's softmax on the CPU, shared by the softmax kernels and cross entropy, which runs it
/// on each row of the logits (tensor/ops/cpu/softmax_kernels.cpp, tensor/ops/cpu/loss_kernels.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lockstep::cpu {

/// y = softmax(x), or log_softmax(x) if `log`, for one line of n elements `stride` apart.
template <class T>
inline void softmax_line(const T* x, T* y, int64_t n, int64_t stride, bool log) {
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

}  // namespace lockstep::cpu
