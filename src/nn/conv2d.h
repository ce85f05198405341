/// \file
/// Conv2d, the 2-D convolution layer (torch.nn.Conv2d) with square kernels.
#pragma once

#include <cstdint>
#include <string>

#include "core/generator.h"
#include "nn/module.h"

namespace lockstep {

/// Conv2d's settings, set by chaining as libtorch's torch::nn::Conv2dOptions:
/// `Conv2dOptions(16, 32, 3).stride(2).padding(1).bias(false)`. Defaults are PyTorch's.
class Conv2dOptions {
 public:
  /// `in_channels` -> `out_channels` with a `kernel_size` x `kernel_size` kernel, stride 1, no
  /// padding, with bias.
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  /// Sets the step of the kernel, in pixels (default 1).
  Conv2dOptions& stride(int64_t value) { stride_ = value; return *this; }
  /// Sets the zeros added on every side (default 0).
  Conv2dOptions& padding(int64_t value) { padding_ = value; return *this; }
  /// Sets whether the layer adds a learned bias (default true).
  Conv2dOptions& bias(bool value) { bias_ = value; return *this; }

  /// C_in.
  int64_t in_channels() const { return in_channels_; }
  /// C_out.
  int64_t out_channels() const { return out_channels_; }
  /// k: the kernel is k x k.
  int64_t kernel_size() const { return kernel_size_; }
  /// The step of the kernel.
  int64_t stride() const { return stride_; }
  /// The zeros added on every side.
  int64_t padding() const { return padding_; }
  /// Whether the layer has a bias.
  bool bias() const { return bias_; }

 private:
  int64_t in_channels_;
  int64_t out_channels_;
  int64_t kernel_size_;
  int64_t stride_ = 1;
  int64_t padding_ = 0;
  bool bias_ = true;
};

/// A 2-D convolution with a square kernel, like torch.nn.Conv2d(in_channels, out_channels,
/// kernel_size, stride=1, padding=0, bias=True). Input (N, C_in, H, W), output
/// (N, C_out, H_out, W_out) with H_out = (H + 2 padding - kernel_size) / stride + 1 (W_out
/// alike). Parameters: `weight` (C_out, C_in, k, k) and, unless the options say bias(false),
/// `bias` (C_out). A convolution followed by BatchNorm2d needs no bias (the normalisation
/// subtracts it again), which is why ResNets build theirs with bias(false).
class Conv2d : public Module {
 public:
  /// A layer with `options` and PyTorch's default initialisation (see reset_parameters).
  explicit Conv2d(const Conv2dOptions& options);
  /// Conv2d(Conv2dOptions(in_channels, out_channels, kernel_size)): stride 1, no padding, bias.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv2d(Conv2dOptions(in_channels, out_channels, kernel_size)) {}

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
