#include "nn/resnet50.h"

#include "nn/init.h"
#include "nn/repoint.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/pool.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

namespace {

// A convolution without bias (a BatchNorm follows it and has its own), initialised as
// torchvision initialises every ResNet convolution.
std::shared_ptr<Conv2d> conv_for_batch_norm(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                            int64_t padding) {
  auto conv = std::make_shared<Conv2d>(Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
  kaiming_normal_(conv->weight, FanMode::fan_out);
  return conv;
}

// One stage: `blocks` Bottlenecks of width `planes`; the first changes the resolution
// (`stride`) and the channels, so it alone has a downsample shortcut.
std::shared_ptr<Sequential> make_layer(int64_t& in_planes, int64_t planes, int64_t blocks, int64_t stride) {
  auto layer = std::make_shared<Sequential>();
  for (int64_t b = 0; b < blocks; ++b) {
    layer->push_back(std::make_shared<Bottleneck>(in_planes, planes, b == 0 ? stride : 1));
    in_planes = planes * Bottleneck::expansion;
  }
  return layer;
}

}  // namespace

Bottleneck::Bottleneck(int64_t in_planes, int64_t planes, int64_t stride) {
  const int64_t out_planes = planes * expansion;
  conv1 = register_module("conv1", conv_for_batch_norm(in_planes, planes, 1, 1, 0));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv_for_batch_norm(planes, planes, 3, stride, 1));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv_for_batch_norm(planes, out_planes, 1, 1, 0));
  bn3 = register_module("bn3", std::make_shared<BatchNorm2d>(out_planes));
  // The shortcut must match the main path's output shape to be added to it.
  if (stride != 1 || in_planes != out_planes) {
    downsample = register_module(
        "downsample", std::make_shared<Sequential>(conv_for_batch_norm(in_planes, out_planes, 1, stride, 0),
                                                   std::make_shared<BatchNorm2d>(out_planes)));
  }
}

//! [bottleneck]
Tensor Bottleneck::forward(const Tensor& input) {
  // x: (N, in_planes, H, W) -> (N, planes, H, W)
  Tensor out = relu((*bn1)((*conv1)(input)));
  // -> (N, planes, H / stride, W / stride)
  out = relu((*bn2)((*conv2)(out)));
  // -> (N, 4 * planes, H / stride, W / stride)
  out = (*bn3)((*conv3)(out));
  const Tensor identity = downsample ? (*downsample)(input) : input;
  return relu(out + identity);
}
//! [bottleneck]

ResNet50::ResNet50(int64_t in_channels, int64_t num_classes) {
  conv1 = register_module("conv1", conv_for_batch_norm(in_channels, 64, 7, 2, 3));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  int64_t in_planes = 64;
  layer1 = register_module("layer1", make_layer(in_planes, 64, 3, 1));
  layer2 = register_module("layer2", make_layer(in_planes, 128, 4, 2));
  layer3 = register_module("layer3", make_layer(in_planes, 256, 6, 2));
  layer4 = register_module("layer4", make_layer(in_planes, 512, 3, 2));
  fc = register_module("fc", std::make_shared<Linear>(512 * Bottleneck::expansion, num_classes));
}

Tensor ResNet50::forward(const Tensor& input) {
  // x: (N, C, H, W) -> (N, 64, H/2, W/2) -> max pool 3x3/2 -> (N, 64, H/4, W/4)
  Tensor x = max_pool2d(relu((*bn1)((*conv1)(input))), 3, 2, 1);
  // -> (N, 256, H/4, W/4) -> (N, 512, H/8, W/8) -> (N, 1024, H/16, W/16) -> (N, 2048, H/32, W/32)
  x = (*layer4)((*layer3)((*layer2)((*layer1)(x))));
  // Global average pooling (torchvision's AdaptiveAvgPool2d(1) and flatten). -> (N, 2048)
  x = mean(x, {2, 3});
  // -> (N, num_classes)
  return (*fc)(x);
}

void Bottleneck::on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) {
  if (name == "conv1") repoint(conv1, module, *this, name, "Conv2d");
  if (name == "bn1") repoint(bn1, module, *this, name, "BatchNorm2d");
  if (name == "conv2") repoint(conv2, module, *this, name, "Conv2d");
  if (name == "bn2") repoint(bn2, module, *this, name, "BatchNorm2d");
  if (name == "conv3") repoint(conv3, module, *this, name, "Conv2d");
  if (name == "bn3") repoint(bn3, module, *this, name, "BatchNorm2d");
  if (name == "downsample") repoint(downsample, module, *this, name, "Sequential");
}

void ResNet50::on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module) {
  if (name == "conv1") repoint(conv1, module, *this, name, "Conv2d");
  if (name == "bn1") repoint(bn1, module, *this, name, "BatchNorm2d");
  if (name == "layer1") repoint(layer1, module, *this, name, "Sequential");
  if (name == "layer2") repoint(layer2, module, *this, name, "Sequential");
  if (name == "layer3") repoint(layer3, module, *this, name, "Sequential");
  if (name == "layer4") repoint(layer4, module, *this, name, "Sequential");
  if (name == "fc") repoint(fc, module, *this, name, "Linear");
}

// The block's settings are read back from its convolutions.
std::shared_ptr<Module> Bottleneck::clone_structure() const {
  return std::make_shared<Bottleneck>(conv1->in_channels, conv1->out_channels, conv2->stride);
}

std::shared_ptr<Module> ResNet50::clone_structure() const {
  return std::make_shared<ResNet50>(conv1->in_channels, fc->out_features);
}

}  // namespace lockstep
