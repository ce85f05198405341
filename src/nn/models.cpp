#include "nn/models.h"

#include "core/error.h"
#include "nn/layers.h"
#include "nn/repoint.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride) {
  conv1 = register_module("conv1", std::make_shared<Conv2d>(
                                       Conv2dOptions(in_planes, planes, 3).stride(stride).padding(1).bias(false)));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", std::make_shared<Conv2d>(Conv2dOptions(planes, planes, 3).padding(1).bias(false)));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  // The shortcut must match the main path's output shape to be added to it.
  if (stride != 1 || in_planes != planes) {
    downsample = register_module(
        "downsample",
        std::make_shared<Sequential>(
            std::make_shared<Conv2d>(Conv2dOptions(in_planes, planes, 1).stride(stride).bias(false)),
            std::make_shared<BatchNorm2d>(planes)));
  }
}

Tensor BasicBlock::forward(const Tensor& input) {
  // x: (N, in_planes, H, W) -> out: (N, planes, H / stride, W / stride)
  Tensor out = relu((*bn1)((*conv1)(input)));
  out = (*bn2)((*conv2)(out));
  const Tensor identity = downsample ? (*downsample)(input) : input;
  return relu(out + identity);
}

ResNet::ResNet(int64_t in_channels, int64_t num_classes) {
  conv1 = register_module("conv1", std::make_shared<Conv2d>(Conv2dOptions(in_channels, 16, 3).padding(1).bias(false)));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(16));
  layer1 = register_module("layer1", std::make_shared<Sequential>(std::make_shared<BasicBlock>(16, 16)));
  layer2 = register_module("layer2", std::make_shared<Sequential>(std::make_shared<BasicBlock>(16, 32, 2)));
  layer3 = register_module("layer3", std::make_shared<Sequential>(std::make_shared<BasicBlock>(32, 64, 2)));
  fc = register_module("fc", std::make_shared<Linear>(64, num_classes));
}

Tensor ResNet::forward(const Tensor& input) {
  // x: (N, C, H, W) -> (N, 16, H, W)
  Tensor x = relu((*bn1)((*conv1)(input)));
  // -> (N, 16, H, W) -> (N, 32, H/2, W/2) -> (N, 64, H/4, W/4)
  x = (*layer3)((*layer2)((*layer1)(x)));
  // Global average pooling: one number per channel, whatever the image size. -> (N, 64)
  x = mean(x, {2, 3});
  // -> (N, num_classes)
  return (*fc)(x);
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp", "cnn", "resnet", "resnet50"};
  return names;
}

std::shared_ptr<Module> make_model(const std::string& name, int64_t in_channels) {
  LOCKSTEP_CHECK(in_channels > 0, "make_model: expected images with at least 1 channel, got ", in_channels);
  const bool fashion_mnist_only = name == "mlp" || name == "cnn";
  LOCKSTEP_CHECK(!fashion_mnist_only || in_channels == 1, "make_model: the ", name,
                 " model takes 1-channel 28 x 28 images (Fashion-MNIST), not ", in_channels,
                 " channels; the resnet and resnet50 models take any");
  if (name == "mlp") {
    // x: (N, 1, 28, 28) -> (N, 784) -> (N, 256) -> (N, 128) -> (N, 10)
    return std::make_shared<Sequential>(std::make_shared<Flatten>(), std::make_shared<Linear>(784, 256),
                                        std::make_shared<ReLU>(true), std::make_shared<Linear>(256, 128),
                                        std::make_shared<ReLU>(true), std::make_shared<Linear>(128, 10));
  }
  if (name == "cnn") {
    // x: (N, 1, 28, 28) -> (N, 32, 26, 26) -> (N, 32, 13, 13) -> (N, 64, 11, 11) -> (N, 64, 5, 5)
    //    -> (N, 1600) -> (N, 128) -> (N, 10)
    return std::make_shared<Sequential>(
        std::make_shared<Conv2d>(1, 32, 3), std::make_shared<ReLU>(true), std::make_shared<MaxPool2d>(2),
        std::make_shared<Conv2d>(32, 64, 3), std::make_shared<ReLU>(true), std::make_shared<MaxPool2d>(2),
        std::make_shared<Flatten>(), std::make_shared<Linear>(1600, 128), std::make_shared<ReLU>(true),
        std::make_shared<Linear>(128, 10));
  }
  if (name == "resnet") return std::make_shared<ResNet>(in_channels, 10);
  if (name == "resnet50") return std::make_shared<ResNet50>(in_channels, 10);
  throw Error("make_model: unknown model '" + name + "': expected mlp, cnn, resnet or resnet50");
}

std::shared_ptr<Module> make_model(const std::string& name) {
  const bool color = name == "resnet" || name == "resnet50";
  return make_model(name, color ? 3 : 1);
}

void BasicBlock::on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) {
  if (name == "conv1") repoint(conv1, module, *this, name, "Conv2d");
  if (name == "bn1") repoint(bn1, module, *this, name, "BatchNorm2d");
  if (name == "conv2") repoint(conv2, module, *this, name, "Conv2d");
  if (name == "bn2") repoint(bn2, module, *this, name, "BatchNorm2d");
  if (name == "downsample") repoint(downsample, module, *this, name, "Sequential");
}

void ResNet::on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) {
  if (name == "conv1") repoint(conv1, module, *this, name, "Conv2d");
  if (name == "bn1") repoint(bn1, module, *this, name, "BatchNorm2d");
  if (name == "layer1") repoint(layer1, module, *this, name, "Sequential");
  if (name == "layer2") repoint(layer2, module, *this, name, "Sequential");
  if (name == "layer3") repoint(layer3, module, *this, name, "Sequential");
  if (name == "fc") repoint(fc, module, *this, name, "Linear");
}

// The block's settings are read back from its first convolution.
std::shared_ptr<Module> BasicBlock::clone_structure() const {
  return std::make_shared<BasicBlock>(conv1->in_channels, conv1->out_channels, conv1->stride);
}

std::shared_ptr<Module> ResNet::clone_structure() const {
  return std::make_shared<ResNet>(conv1->in_channels, fc->out_features);
}

}  // namespace lockstep
