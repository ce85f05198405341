#include "nn/init.h"

#include <cmath>

#include "tensor/autograd/grad_mode.h"
#include "core/error.h"
#include "tensor/ops/elementwise.h"

namespace lockstep {

namespace {
// Whether a SkipInitGuard lives on this thread.
thread_local bool skipping_init = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : was_skipping_(skipping_init) { skipping_init = true; }

SkipInitGuard::~SkipInitGuard() { skipping_init = was_skipping_; }

int64_t fan_in(const Tensor& tensor) {
  LOCKSTEP_CHECK(tensor.dim() >= 2, "fan_in: expected a weight with at least 2 dimensions (out, in, ...), got shape ",
                 shape_str(tensor.shape()));
  // weight: (out, in, k...) -> in * k...
  int64_t fan = tensor.size(1);
  for (int64_t d = 2; d < tensor.dim(); ++d) fan *= tensor.size(d);
  return fan;
}

int64_t fan_out(const Tensor& tensor) {
  LOCKSTEP_CHECK(tensor.dim() >= 2, "fan_out: expected a weight with at least 2 dimensions (out, in, ...), got shape ",
                 shape_str(tensor.shape()));
  // weight: (out, in, k...) -> out * k...
  int64_t fan = tensor.size(0);
  for (int64_t d = 2; d < tensor.dim(); ++d) fan *= tensor.size(d);
  return fan;
}

const Tensor& uniform_(const Tensor& tensor, double lo, double hi, Generator* generator) {
  LOCKSTEP_CHECK(lo <= hi, "uniform_: expected lo <= hi, got lo = ", lo, " and hi = ", hi);
  if (skipping_init) return tensor;
  NoGradGuard no_grad;
  // Draw in f64 on the CPU, then convert once, so the values do not depend on the target dtype.
  const Tensor values = rand(tensor.shape(), TensorOptions().dtype(DType::f64), generator) * (hi - lo) + lo;
  tensor.copy_(values.to(tensor.dtype()).to(tensor.device()));
  return tensor;
}

const Tensor& kaiming_uniform_(const Tensor& tensor, double a, Generator* generator) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(fan_in(tensor)));
  return uniform_(tensor, -bound, bound, generator);
}

const Tensor& kaiming_normal_(const Tensor& tensor, FanMode mode, Generator* generator) {
  const int64_t fan = mode == FanMode::fan_in ? fan_in(tensor) : fan_out(tensor);
  const double std = std::sqrt(2.0 / static_cast<double>(fan));
  if (skipping_init) return tensor;
  NoGradGuard no_grad;
  // Draw in f64 on the CPU, then convert once, as uniform_ does.
  const Tensor values = randn(tensor.shape(), TensorOptions().dtype(DType::f64), generator) * std;
  tensor.copy_(values.to(tensor.dtype()).to(tensor.device()));
  return tensor;
}

const Tensor& zeros_(const Tensor& tensor) {
  NoGradGuard no_grad;
  return tensor.zero_();
}

const Tensor& ones_(const Tensor& tensor) {
  NoGradGuard no_grad;
  return tensor.fill_(1.0);
}

void reset_weight_and_bias_(const Tensor& weight, const Tensor& bias, Generator* generator) {
  kaiming_uniform_(weight, std::sqrt(5.0), generator);
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in(weight)));
    uniform_(bias, -bound, bound, generator);
  }
}

}  // namespace lockstep
