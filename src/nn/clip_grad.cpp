#include "nn/clip_grad.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

double grad_squared_sum(const std::vector<Tensor>& params) {
  const NoGradGuard no_grad;
  double total = 0.0;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    // f64, so that a sum of millions of squares keeps the digits of the small ones.
    const Tensor g = p.grad().to(DType::f64);
    total += sum(mul(g, g)).item();
  }
  return total;
}

void clip_grads_with_norm_(const std::vector<Tensor>& params, double max_norm, double total_norm) {
  LOCKSTEP_CHECK(max_norm > 0, "clip_grad_norm_: max_norm must be positive, got ", max_norm);
  // The 1e-6 keeps the factor finite for all-zero gradients; below the cap nothing changes.
  const double factor = std::min(1.0, max_norm / (total_norm + 1e-6));
  if (factor == 1.0) return;
  const NoGradGuard no_grad;
  for (const Tensor& p : params) {
    if (p.grad().defined()) p.grad().mul_(factor);
  }
}

//! [clip]
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  const double total = std::sqrt(grad_squared_sum(params));
  clip_grads_with_norm_(params, max_norm, total);
  return total;
}
//! [clip]

}  // namespace lockstep
