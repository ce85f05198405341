/// \file
/// Adam's and AdamW's per-element update rule, written once for both devices: the CPU loop in
/// optim/adam.cpp and the CUDA kernel in optim/cuda/fused_updates.cu call the same function, so
/// the two cannot drift apart.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace lockstep {

/// The hyper-parameters of one Adam update of one parameter, bias corrections already folded in.
struct AdamStep {
  double lr;                     ///< learning rate
  double beta1;                  ///< decay of the running average of the gradient
  double beta2;                  ///< decay of the running average of its square
  double eps;                    ///< added to the denominator
  double weight_decay;           ///< L2 penalty (Adam) or decoupled weight decay (AdamW)
  bool decoupled_weight_decay;   ///< AdamW: shrink the weight instead of adding to the gradient
  double step_size;              ///< lr / (1 - beta1^t)
  double bias_correction2_sqrt;  ///< sqrt(1 - beta2^t)
};

/// An AdamStep converted once per update to what the per-element rule reads: the numbers in the
/// element type T, and the switches as plain flags that never change during the update.
template <class T>
struct AdamConstants {
  T beta1;                  ///< beta1
  T beta2;                  ///< beta2
  T one_minus_beta1;        ///< 1 - beta1
  T one_minus_beta2;        ///< 1 - beta2
  T weight_decay;           ///< the L2 penalty's factor
  T decay;                  ///< AdamW's shrink factor 1 - lr * weight_decay
  T eps;                    ///< eps
  T step_size;              ///< lr / (1 - beta1^t)
  T bias_correction2_sqrt;  ///< sqrt(1 - beta2^t)
  bool decoupled;           ///< AdamW: shrink the weight by `decay`
  bool l2_penalty;          ///< Adam with weight_decay != 0: add weight_decay * p to the gradient
};

/// The AdamConstants of `s` in the element type T.
template <class T>
AdamConstants<T> adam_constants(const AdamStep& s) {
  return {static_cast<T>(s.beta1),
          static_cast<T>(s.beta2),
          static_cast<T>(1.0 - s.beta1),
          static_cast<T>(1.0 - s.beta2),
          static_cast<T>(s.weight_decay),
          static_cast<T>(1.0 - s.lr * s.weight_decay),
          static_cast<T>(s.eps),
          static_cast<T>(s.step_size),
          static_cast<T>(s.bias_correction2_sqrt),
          s.decoupled_weight_decay,
          !s.decoupled_weight_decay && s.weight_decay != 0.0};
}

/// Adam's rule for element i: its gradient is read once, its two moment estimates and its value
/// are written once. As in sgd_rule.h, the switches in `c` are the same for every element, so
/// a loop around this compiles to one vectorised loop per combination.
template <class T>
LOCKSTEP_HOST_DEVICE void adam_rule(int64_t i, T* param, const T* grad, T* exp_avg, T* exp_avg_sq,
                                    const AdamConstants<T>& c) {
  using std::sqrt;  // on the CPU std::sqrt; on a GPU CUDA's overloads for float and double
  T g = grad[i];
  if (c.decoupled) {
    // AdamW: shrink the weight itself, outside the adaptive scaling.
    param[i] *= c.decay;
  } else if (c.l2_penalty) {
    // Adam: the L2 penalty's gradient joins the loss's.
    g += c.weight_decay * param[i];
  }
  // Running averages of the gradient (m) and of its square (v).
  const T m = c.beta1 * exp_avg[i] + c.one_minus_beta1 * g;
  const T v = c.beta2 * exp_avg_sq[i] + c.one_minus_beta2 * g * g;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  // Both averages start at 0 and are biased towards it early on; the corrections undo that.
  // (On the CPU, sqrt vectorises only when the build passes -fno-math-errno: otherwise each
  // call must be able to set errno, which keeps the loop scalar.)
  const T denom = sqrt(v) / c.bias_correction2_sqrt + c.eps;
  param[i] -= c.step_size * m / denom;
}

}  // namespace lockstep
