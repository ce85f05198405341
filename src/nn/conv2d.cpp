#include "nn/conv2d.h"

#include "core/error.h"
#include "nn/init.h"
#include "tensor/ops/conv.h"

namespace lockstep {

namespace {
// A square size as PyTorch prints the tuple: "(3, 3)".
std::string pair_str(int64_t value) { return "(" + std::to_string(value) + ", " + std::to_string(value) + ")"; }
}  // namespace

Conv2d::Conv2d(const Conv2dOptions& options)
    : in_channels(options.in_channels()),
      out_channels(options.out_channels()),
      kernel_size(options.kernel_size()),
      stride(options.stride()),
      padding(options.padding()) {
  LOCKSTEP_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0 && stride > 0 && padding >= 0,
                 "Conv2d: expected positive channels, kernel_size and stride and padding >= 0, got in_channels=",
                 in_channels, ", out_channels=", out_channels, ", kernel_size=", kernel_size, ", stride=", stride,
                 ", padding=", padding);
  weight = register_parameter("weight", empty({out_channels, in_channels, kernel_size, kernel_size}));
  if (options.bias()) bias = register_parameter("bias", empty({out_channels}));
  reset_parameters();
}

void Conv2d::reset_parameters(Generator* generator) {
  reset_weight_and_bias_(weight, bias, generator);
}

Tensor Conv2d::forward(const Tensor& input) {
  LOCKSTEP_CHECK(input.dim() == 4 && input.size(1) == in_channels, "Conv2d: expected input of shape (N, ",
                 in_channels, ", H, W), got ", shape_str(input.shape()));
  return conv2d(input, weight, bias, stride, padding);
}

std::string Conv2d::extra_repr() const {
  std::string text = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                     ", kernel_size=" + pair_str(kernel_size) + ", stride=" + pair_str(stride);
  if (padding != 0) text += ", padding=" + pair_str(padding);
  if (!bias.defined()) text += ", bias=False";
  return text;
}

std::shared_ptr<Module> Conv2d::clone_structure() const {
  return std::make_shared<Conv2d>(
      Conv2dOptions(in_channels, out_channels, kernel_size).stride(stride).padding(padding).bias(bias.defined()));
}

}  // namespace lockstep
