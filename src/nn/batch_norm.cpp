#include "nn/batch_norm.h"

#include "tensor/autograd/grad_mode.h"
#include "core/error.h"
#include "tensor/ops/batch_norm.h"
#include "tensor/ops/elementwise.h"

namespace lockstep {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum)
    : num_features(num_features), eps(eps), momentum(momentum) {
  LOCKSTEP_CHECK(num_features > 0, "BatchNorm2d: expected a positive number of channels, got ", num_features);
  // Start as the identity map: scale 1, shift 0; running statistics of a standard normal.
  weight = register_parameter("weight", ones({num_features}));
  bias = register_parameter("bias", zeros({num_features}));
  running_mean = register_buffer("running_mean", zeros({num_features}));
  running_var = register_buffer("running_var", ones({num_features}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, TensorOptions().dtype(DType::i64)));
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  LOCKSTEP_CHECK(input.dim() == 4, "BatchNorm2d: expected 4D input (N, C, H, W), got ", input.dim(), "D input of shape ",
                 shape_str(input.shape()));
  LOCKSTEP_CHECK(input.size(1) == num_features, "BatchNorm2d: expected ", num_features, " channels, got input of shape ",
                 shape_str(input.shape()));
  if (is_training()) {
    // A counter, not learned: bumped outside autograd, as PyTorch's num_batches_tracked.add_(1).
    // Integer tensors have no arithmetic, so the count takes a trip through f64 (exact up to
    // 2^53 batches) on its own device: reading it on the CPU would make the host wait for a GPU.
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked.to(DType::f64) + 1.0);
  }
  return batch_norm(input, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

std::string BatchNorm2d::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + format_float(eps) + ", momentum=" + format_float(momentum) +
         ", affine=True, track_running_stats=True";
}

std::shared_ptr<Module> BatchNorm2d::clone_structure() const {
  return std::make_shared<BatchNorm2d>(num_features, eps, momentum);
}

}  // namespace lockstep
