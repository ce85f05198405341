/// \file
/// Conv2d, the 2-D convolution layer (torch.nn.Conv2d) with square kernels.
#pragma once

#include <cstdint>
#include <string>

#include "core/generator.h"
#include "nn/module.h"

namespace lockstep {

/// A 2-D convolution with a square kernel, like torch.nn.Conv2d(in_channels, out_channels,
/// kernel_size, stride, padding, bias). Input (N, C_in, H, W), output (N, C_out, H_out, W_out)
/// with H_out = (H + 2 padding - kernel_size) / stride + 1 (W_out alike). Parameters: `weight`
/// (C_out, C_in, k, k) and, unless `bias` is false, `bias` (C_out). A convolution followed by
/// BatchNorm2d needs no bias (the normalisation subtracts it again), which is why ResNets pass
/// bias = false.
class Conv2d : public Module {
 public:
  /// A layer with PyTorch's default initialisation (see reset_parameters).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);

  /// x: (N, C_in, H, W) -> (N, C_out, H_out, W_out).
  Tensor forward(const Tensor& input) override;
  /// A new Conv2d with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// Re-draws the parameters as PyTorch does: weight kaiming_uniform_(a = sqrt(5)), bias
  /// uniform in +-1/sqrt(fan_in) with fan_in = C_in * k * k, from `generator` (the default
  /// generator if null).
  void reset_parameters(Generator* generator = nullptr);
  /// "1, 32, kernel_size=(3, 3), stride=(1, 1)", plus padding and bias=False when they differ
  /// from the defaults, as PyTorch prints it.
  std::string extra_repr() const override;

  int64_t in_channels;   ///< C_in.
  int64_t out_channels;  ///< C_out.
  int64_t kernel_size;   ///< k: the kernel is k x k.
  int64_t stride;        ///< Step of the kernel, in pixels.
  int64_t padding;       ///< Zeros added on every side.
  Tensor weight;         ///< (C_out, C_in, k, k).
  Tensor bias;           ///< (C_out), or undefined for a layer without bias.
};

}  // namespace lockstep
