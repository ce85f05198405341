/// \file
/// The models the chapters train, chosen by name with make_model: a multilayer perceptron and
/// a small CNN for Fashion-MNIST (1 x 28 x 28), a small ResNet built for CIFAR-10 (3 x 32 x 32),
/// and torchvision's ResNet-50 (nn/resnet50.h), the material's model. The ResNets take any
/// number of input channels and any image size. All have 10 classes.
///
/// Each is built so that the same definition in PyTorch gives the same state_dict keys and the
/// same parameter shapes, so a checkpoint can be compared key by key; @ref chapter2, section 2,
/// lists those PyTorch definitions.
///
/// The ResNet is ResNet-8 in the CIFAR style of He et al. (2016): one basic block per stage,
/// convolutions before a BatchNorm without bias, as torchvision's. Unlike torchvision, the
/// layers keep PyTorch's default initialisation (no kaiming_normal_ pass).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/resnet50.h"
#include "nn/sequential.h"

namespace lockstep {

/// The residual block of ResNet-18/34 (torchvision's BasicBlock): two 3x3 convolutions with
/// BatchNorm, whose output is added to the block's input before the last ReLU. When the block
/// changes the number of channels or the resolution, the input goes through `downsample` (a
/// 1x1 convolution with stride plus BatchNorm) so the two can be added.
class BasicBlock : public Module {
 public:
  /// x: (N, in_planes, H, W) -> (N, planes, H / stride, W / stride).
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride = 1);

  /// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
  Tensor forward(const Tensor& input) override;
  /// A new BasicBlock with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;

  std::shared_ptr<Conv2d> conv1;          ///< 3x3, stride `stride`, no bias.
  std::shared_ptr<BatchNorm2d> bn1;       ///< After conv1.
  std::shared_ptr<Conv2d> conv2;          ///< 3x3, stride 1, no bias.
  std::shared_ptr<BatchNorm2d> bn2;       ///< After conv2.
  std::shared_ptr<Sequential> downsample;  ///< 1x1 conv + BN on the shortcut, or null (identity).

 protected:
  /// Re-points the member of a child swapped by replace_module (see Module::on_module_replaced).
  void on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) override;
};

/// A small CIFAR-style ResNet (ResNet-8): a 3x3 stem with 16 channels, three stages of one
/// BasicBlock with 16, 32 (stride 2) and 64 (stride 2) channels, global average pooling and a
/// Linear classifier. Input (N, in_channels, H, W), output (N, num_classes) logits. Built for
/// 3 x 32 x 32 images (make_model("resnet")); global pooling makes it work at any size, so
/// ResNet(1) takes 1 x 28 x 28 Fashion-MNIST images as well.
class ResNet : public Module {
 public:
  /// A ResNet-8 for `in_channels`-channel images and `num_classes` classes.
  explicit ResNet(int64_t in_channels = 3, int64_t num_classes = 10);

  /// x: (N, in_channels, H, W) -> (N, num_classes).
  Tensor forward(const Tensor& input) override;
  /// A new ResNet with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;

  std::shared_ptr<Conv2d> conv1;       ///< Stem: 3x3, in_channels -> 16, no bias.
  std::shared_ptr<BatchNorm2d> bn1;    ///< After the stem.
  std::shared_ptr<Sequential> layer1;  ///< One BasicBlock, 16 channels, H x W.
  std::shared_ptr<Sequential> layer2;  ///< One BasicBlock, 32 channels, H/2 x W/2.
  std::shared_ptr<Sequential> layer3;  ///< One BasicBlock, 64 channels, H/4 x W/4.
  std::shared_ptr<Linear> fc;          ///< 64 -> num_classes.

 protected:
  /// Re-points the member of a child swapped by replace_module (see Module::on_module_replaced).
  void on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) override;
};

/// The names make_model knows, in the order the chapters' --model flag lists them: "mlp",
/// "cnn", "resnet", "resnet50".
const std::vector<std::string>& model_names();

/// The model named `name` (one of model_names()) for images with `in_channels` channels,
/// freshly initialised from the default generator (call manual_seed first for a reproducible
/// model); all return (N, 10) logits. "mlp" and "cnn" take (N, 1, 28, 28) only; "resnet" and
/// "resnet50" any (N, in_channels, H, W). Another name, or channels a model cannot take, is an
/// error naming what fits.
std::shared_ptr<Module> make_model(const std::string& name, int64_t in_channels);

/// make_model(name, in_channels) with the channels the model was designed for: 1 for "mlp" and
/// "cnn" (Fashion-MNIST), 3 for "resnet" and "resnet50" (CIFAR-10).
std::shared_ptr<Module> make_model(const std::string& name);

}  // namespace lockstep
