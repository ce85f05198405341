/// \file
/// Weight initialisation (torch.nn.init): fill a tensor in place with values drawn so that
/// signals neither explode nor vanish as they pass through many layers.
///
/// Every layer's default, as in PyTorch's reset_parameters(): the weight gets
/// kaiming_uniform_(weight, sqrt(5)) and the bias uniform_(bias, -1/sqrt(fan_in), 1/sqrt(fan_in)).
/// With a = sqrt(5) the Kaiming bound works out to 1/sqrt(fan_in) as well, so every weight and
/// bias of a fresh Linear or Conv2d lies in [-1/sqrt(fan_in), 1/sqrt(fan_in)).
///
/// The functions work under NoGradGuard themselves (a parameter may be re-initialised at any
/// time) and draw from `generator`, or from default_generator() (seeded by manual_seed) when
/// it is null, so the same seed gives the same model.
#pragma once

#include <cstdint>

#include "core/generator.h"
#include "tensor/tensor.h"

namespace lockstep {

/// The number of inputs that feed one output unit: size(1) times the product of the sizes
/// after it (in_features for a Linear weight (out, in); C_in * kH * kW for a Conv2d weight
/// (C_out, C_in, kH, kW)). `tensor` needs at least 2 dimensions.
int64_t fan_in(const Tensor& tensor);

/// The number of output units one input feeds: size(0) times the product of the sizes after
/// size(1) (out_features for a Linear weight; C_out * kH * kW for a Conv2d weight). `tensor`
/// needs at least 2 dimensions.
int64_t fan_out(const Tensor& tensor);

/// Which fan Kaiming initialisation keeps the variance for: the forward pass's (fan_in, each
/// output sums fan_in products) or the backward pass's (fan_out, each input's gradient sums
/// fan_out products). PyTorch's mode='fan_in' and mode='fan_out'.
enum class FanMode { fan_in, fan_out };

/// Fills `tensor` with values uniform in [lo, hi); returns it.
const Tensor& uniform_(const Tensor& tensor, double lo, double hi, Generator* generator = nullptr);

/// Kaiming (He) uniform initialisation for a layer followed by a leaky ReLU of negative slope
/// `a` (a = 0: plain ReLU): uniform in [-bound, bound) with
///     gain = sqrt(2 / (1 + a^2)),   bound = gain * sqrt(3 / fan_in),
/// which gives the weights variance gain^2 / fan_in. Returns `tensor`.
const Tensor& kaiming_uniform_(const Tensor& tensor, double a = 0.0, Generator* generator = nullptr);

/// Kaiming (He) normal initialisation for a layer followed by a ReLU: normal with mean 0 and
///     std = sqrt(2 / fan),   fan = fan_in(tensor) or fan_out(tensor) as `mode` says,
/// PyTorch's kaiming_normal_(tensor, mode=..., nonlinearity="relu"), which torchvision's ResNets
/// use with FanMode::fan_out for every convolution. Returns `tensor`.
const Tensor& kaiming_normal_(const Tensor& tensor, FanMode mode = FanMode::fan_in, Generator* generator = nullptr);

/// Fills `tensor` with zeros; returns it.
const Tensor& zeros_(const Tensor& tensor);

/// Fills `tensor` with ones; returns it.
const Tensor& ones_(const Tensor& tensor);

/// While one lives, the functions above that draw random numbers (uniform_, kaiming_uniform_,
/// kaiming_normal_, reset_weight_and_bias_) leave their tensor as it is and draw nothing, on the calling thread
/// (PyTorch's torch.nn.utils.skip_init does this for one module). For modules whose values are
/// about to be overwritten, such as DataParallel's replicas: building them leaves the random
/// numbers a training draws as they were.
class SkipInitGuard {
 public:
  /// Skips drawing on this thread until destroyed.
  SkipInitGuard();
  /// Draws again, unless an outer guard still lives.
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;             ///< A guard is one scope.
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;  ///< A guard is one scope.

 private:
  bool was_skipping_;
};

/// PyTorch's default initialisation of a Linear or Conv2d layer (their reset_parameters):
/// weight kaiming_uniform_ with a = sqrt(5), which makes it uniform in +-1/sqrt(fan_in), and
/// bias (if defined) uniform in the same range.
void reset_weight_and_bias_(const Tensor& weight, const Tensor& bias, Generator* generator = nullptr);

}  // namespace lockstep
