/// \file
/// ResNet-50 exactly as torchvision builds it (torchvision.models.resnet50): the model of the
/// material Lockstep answers, whose results table `make results` regenerates.
///
/// He et al. (2016), "Deep Residual Learning for Image Recognition", in torchvision's "v1.5"
/// form (the stride sits in the bottleneck's 3x3 convolution, not its first 1x1). Layout, for a
/// (N, C, H, W) input:
///
///     conv1 7x7/2 (C -> 64), bn1, ReLU, max pool 3x3/2           -> (N, 64, H/4, W/4)
///     layer1: 3 Bottlenecks, width 64, out 256                    -> (N, 256, H/4, W/4)
///     layer2: 4 Bottlenecks, width 128, out 512, first stride 2   -> (N, 512, H/8, W/8)
///     layer3: 6 Bottlenecks, width 256, out 1024, first stride 2  -> (N, 1024, H/16, W/16)
///     layer4: 3 Bottlenecks, width 512, out 2048, first stride 2  -> (N, 2048, H/32, W/32)
///     global average pool, fc (2048 -> num_classes)               -> (N, num_classes)
///
/// (sizes round up at each stride). The state_dict keys are torchvision's (conv1.weight,
/// layer1.0.downsample.0.weight, fc.bias, ...), and so is the initialisation: every
/// convolution kaiming_normal_ with fan_out, every BatchNorm weight 1 and bias 0, the Linear
/// PyTorch's default. With 10 classes it has 23,528,522 parameters, as resnet50(num_classes=10).
///
/// Built for ImageNet's 224 x 224 images, it takes CIFAR-10's 32 x 32 (the stem leaves 8 x 8)
/// and, with in_channels 1, Fashion-MNIST's 28 x 28 (7 x 7) as the material does: untrained,
/// unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/sequential.h"

namespace lockstep {

/// ResNet-50's residual block (torchvision's Bottleneck): a 1x1 convolution narrows the
/// channels to `planes`, a 3x3 one (with the block's stride) works at that width, and a 1x1
/// one widens to 4 x planes; each is followed by BatchNorm, and the block's input is added
/// before the last ReLU, through `downsample` when the shapes differ.
class Bottleneck : public Module {
 public:
  /// The factor between the block's width and its output channels.
  static constexpr int64_t expansion = 4;

  /// x: (N, in_planes, H, W) -> (N, 4 * planes, H / stride, W / stride).
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride = 1);

  /// relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + shortcut(x)).
  Tensor forward(const Tensor& input) override;
  /// A new Bottleneck with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;

  std::shared_ptr<Conv2d> conv1;           ///< 1x1, in_planes -> planes, no bias.
  std::shared_ptr<BatchNorm2d> bn1;        ///< After conv1.
  std::shared_ptr<Conv2d> conv2;           ///< 3x3, stride `stride`, planes -> planes, no bias.
  std::shared_ptr<BatchNorm2d> bn2;        ///< After conv2.
  std::shared_ptr<Conv2d> conv3;           ///< 1x1, planes -> 4 * planes, no bias.
  std::shared_ptr<BatchNorm2d> bn3;        ///< After conv3.
  std::shared_ptr<Sequential> downsample;  ///< 1x1 conv (stride) + BN on the shortcut, or null.

 protected:
  /// Re-points the member of a child swapped by replace_module (see Module::on_module_replaced).
  void on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) override;
};

/// torchvision's ResNet-50 (see the file comment): input (N, in_channels, H, W), output
/// (N, num_classes) logits.
class ResNet50 : public Module {
 public:
  /// A freshly initialised ResNet-50 (torchvision's initialisation, from the default generator).
  explicit ResNet50(int64_t in_channels = 3, int64_t num_classes = 10);

  /// x: (N, in_channels, H, W) -> (N, num_classes).
  Tensor forward(const Tensor& input) override;
  /// A new ResNet50 with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;

  std::shared_ptr<Conv2d> conv1;       ///< Stem: 7x7, stride 2, padding 3, in_channels -> 64, no bias.
  std::shared_ptr<BatchNorm2d> bn1;    ///< After the stem.
  std::shared_ptr<Sequential> layer1;  ///< 3 Bottlenecks, 256 channels out, H/4 x W/4.
  std::shared_ptr<Sequential> layer2;  ///< 4 Bottlenecks, 512 channels out, H/8 x W/8.
  std::shared_ptr<Sequential> layer3;  ///< 6 Bottlenecks, 1024 channels out, H/16 x W/16.
  std::shared_ptr<Sequential> layer4;  ///< 3 Bottlenecks, 2048 channels out, H/32 x W/32.
  std::shared_ptr<Linear> fc;          ///< 2048 -> num_classes.

 protected:
  /// Re-points the member of a child swapped by replace_module (see Module::on_module_replaced).
  void on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) override;
};

}  // namespace lockstep
