/// \file
/// The layers without parameters: ReLU, MaxPool2d, Flatten and Dropout (torch.nn's classes of
/// the same names). Each wraps one op so that it can sit in a Sequential.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace lockstep {

/// max(x, 0) elementwise, like torch.nn.ReLU(inplace). Any shape.
class ReLU : public Module {
 public:
  /// With `inplace`, forward writes over its input (relu_) instead of a new tensor, so the
  /// layer's output needs no memory of its own; the layer before must not need its output for
  /// backward (conv2d, linear and batch_norm do not).
  explicit ReLU(bool inplace = false);

  /// x -> max(x, 0), same shape: a new tensor, or x itself with `inplace`.
  Tensor forward(const Tensor& input) override;
  /// A new ReLU with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// "inplace=True" when set, else nothing, as PyTorch prints it.
  std::string extra_repr() const override;

  bool inplace;  ///< Whether forward overwrites its input.
};

/// Max pooling over k x k windows, like torch.nn.MaxPool2d(kernel_size, stride, padding).
/// Input (N, C, H, W), output (N, C, H_out, W_out) with H_out = (H + 2 padding - k) / stride + 1.
class MaxPool2d : public Module {
 public:
  /// `stride` 0 means stride = kernel_size (non-overlapping windows), PyTorch's default.
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);

  /// x: (N, C, H, W) -> (N, C, H_out, W_out).
  Tensor forward(const Tensor& input) override;
  /// A new MaxPool2d with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// "kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False", as PyTorch prints it
  /// (Lockstep has no dilation or ceil_mode: they are always 1 and False).
  std::string extra_repr() const override;

  int64_t kernel_size;  ///< k: the window is k x k.
  int64_t stride;       ///< Step between windows (kernel_size when 0 was passed).
  int64_t padding;      ///< -infinity added on every side.
};

/// Merges dimensions start_dim..end_dim into one, like torch.nn.Flatten: the default turns
/// images (N, C, H, W) into rows (N, C*H*W) for a Linear layer.
class Flatten : public Module {
 public:
  /// Flattens start_dim..end_dim (negative counts from the end).
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}

  /// x: (N, C, H, W) -> (N, C*H*W) with the defaults.
  Tensor forward(const Tensor& input) override;
  /// A new Flatten with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// "start_dim=1, end_dim=-1".
  std::string extra_repr() const override;

  int64_t start_dim;  ///< First dimension merged.
  int64_t end_dim;    ///< Last dimension merged.
};

/// Dropout, like torch.nn.Dropout(p): in training mode each element is zeroed with probability
/// p and the rest scaled by 1/(1-p) (see tensor/ops/dropout.h); in evaluation mode it returns its
/// input unchanged. The mask is drawn from the default generator. Any shape.
class Dropout : public Module {
 public:
  /// `p` in [0, 1].
  explicit Dropout(double p = 0.5);

  /// x -> x with elements dropped (training) or x itself (evaluation).
  Tensor forward(const Tensor& input) override;
  /// A new Dropout with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// "p=0.5, inplace=False", as PyTorch prints it.
  std::string extra_repr() const override;

  double p;  ///< Probability of zeroing an element.
};

}  // namespace lockstep
