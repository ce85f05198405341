/// \file
/// SGD's per-element update rule, written once for both devices: the CPU loop in optim/sgd.cpp
/// and the CUDA kernel in optim/cuda/fused_updates.cu call the same function, so the two
/// cannot drift apart.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace lockstep {

/// The hyper-parameters of one SGD update of one parameter.
struct SGDStep {
  double lr;            ///< learning rate
  double momentum;      ///< momentum factor (0: plain SGD)
  double dampening;     ///< dampening of the gradient added to the momentum buffer
  double weight_decay;  ///< L2 penalty
  bool nesterov;        ///< Nesterov momentum
  bool first_step;      ///< the momentum buffer does not exist yet: it starts as d
};

/// An SGDStep converted once per update to what the per-element rule reads: the numbers in the
/// element type T, and the switches as plain flags that never change during the update.
template <class T>
struct SGDConstants {
  T lr;                   ///< learning rate
  T momentum;             ///< momentum factor
  T weight_decay;         ///< L2 penalty
  T keep;                 ///< 1 - dampening
  bool use_weight_decay;  ///< weight_decay != 0
  bool use_momentum;      ///< momentum != 0 (otherwise there is no buffer)
  bool nesterov;          ///< Nesterov momentum
  bool first_step;        ///< the momentum buffer starts as d
};

/// The SGDConstants of `s` in the element type T.
template <class T>
SGDConstants<T> sgd_constants(const SGDStep& s) {
  return {static_cast<T>(s.lr), static_cast<T>(s.momentum), static_cast<T>(s.weight_decay),
          static_cast<T>(1.0 - s.dampening), s.weight_decay != 0.0, s.momentum != 0.0, s.nesterov, s.first_step};
}

// [sgd rule]
/// SGD's rule for element i: its gradient is read once, and its momentum buffer and value are
/// written once. `buf` is not touched without momentum (it may then be null). The switches in
/// `c` are the same for every element, so a compiler that inlines this into a loop compiles
/// one vectorised loop per combination instead of testing them per element.
template <class T>
LOCKSTEP_HOST_DEVICE void sgd_rule(int64_t i, T* param, const T* grad, T* buf, const SGDConstants<T>& c) {
  // d = g + weight_decay * p: the L2 penalty's gradient joins the loss's.
  T d = grad[i];
  if (c.use_weight_decay) d += c.weight_decay * param[i];
  if (c.use_momentum) {
    // buf = momentum * buf + (1 - dampening) * d, or d itself on the first step.
    const T b = c.first_step ? d : c.momentum * buf[i] + c.keep * d;
    buf[i] = b;
    // Nesterov looks ahead along the buffer; classical momentum steps along it.
    d = c.nesterov ? d + c.momentum * b : b;
  }
  param[i] -= c.lr * d;
}
// [sgd rule]

}  // namespace lockstep
