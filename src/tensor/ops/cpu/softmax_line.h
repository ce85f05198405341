/// \file
/// One line's softmax on the CPU, shared by the softmax kernels and cross entropy, which runs it
/// on each row of the logits (tensor/ops/cpu/softmax_kernels.cpp, tensor/ops/cpu/loss_kernels.cpp).
///
/// Both compute in `opmath_t<T>`: f32 and f64 in themselves, f16 and bf16 in float, rounding
/// each output to T once. The sum of exponentials is accumulated in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"

namespace lockstep::cpu {

/// The largest of n elements `stride` apart, in opmath_t<T>. NaNs need no special care: one
/// NaN makes the softmax's sum NaN, and so the whole line, as in PyTorch.
template <class T>
inline opmath_t<T> line_max(const T* x, int64_t n, int64_t stride) {
  using C = opmath_t<T>;
  C m = static_cast<C>(x[0]);
  for (int64_t j = 1; j < n; ++j) m = std::max(m, static_cast<C>(x[j * stride]));
  return m;
}

/// What log_softmax_line computed its line from: y_j = (x_j - max) - log_sum, with log_sum =
/// log(sum_k e^(x_k - max)). Cross entropy takes the target's entry from it, unrounded.
template <class C>
struct LogSoftmaxTerms {
  C max;      ///< The line's largest element.
  C log_sum;  ///< The logarithm of the sum of e^(x_k - max).
};

/// y = log_softmax(x) for one line of n elements `stride` apart; returns the terms it used.
template <class T>
inline LogSoftmaxTerms<opmath_t<T>> log_softmax_line(const T* x, T* y, int64_t n, int64_t stride) {
  using C = opmath_t<T>;
  const C m = line_max(x, n, stride);
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(static_cast<C>(x[j * stride]) - m);
  const C log_s = static_cast<C>(std::log(s));
  for (int64_t j = 0; j < n; ++j) y[j * stride] = static_cast<T>((static_cast<C>(x[j * stride]) - m) - log_s);
  return {m, log_s};
}

/// y = softmax(x) for one line of n elements `stride` apart.
template <class T>
inline void softmax_line(const T* x, T* y, int64_t n, int64_t stride) {
  using C = opmath_t<T>;
  // An f32 or f64 y holds each e^(x_j - m) until their sum is known and is then normalised in
  // place; a 16-bit y would round them there, so for f16 and bf16 the exponential is taken
  // again in the second pass instead.
  constexpr bool keep_in_y = std::is_same_v<T, C>;
  const C m = line_max(x, n, stride);
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const C e = std::exp(static_cast<C>(x[j * stride]) - m);
    if constexpr (keep_in_y) y[j * stride] = e;
    s += e;
  }
  const C inv_s = static_cast<C>(1.0 / s);
  for (int64_t j = 0; j < n; ++j) {
    const C e = keep_in_y ? static_cast<C>(y[j * stride]) : std::exp(static_cast<C>(x[j * stride]) - m);
    y[j * stride] = static_cast<T>(e * inv_s);
  }
}

}  // namespace lockstep::cpu
