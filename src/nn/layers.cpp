#include "nn/layers.h"

#include "core/error.h"
#include "tensor/ops/dropout.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/pool.h"

namespace lockstep {

ReLU::ReLU(bool inplace) : inplace(inplace) {}

Tensor ReLU::forward(const Tensor& input) { return inplace ? relu_(input) : relu(input); }

std::string ReLU::extra_repr() const { return inplace ? "inplace=True" : ""; }

MaxPool2d::MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding)
    : kernel_size(kernel_size), stride(stride == 0 ? kernel_size : stride), padding(padding) {
  LOCKSTEP_CHECK(kernel_size > 0 && stride >= 0 && padding >= 0, "MaxPool2d: expected kernel_size > 0, stride >= 0 ",
                 "and padding >= 0, got kernel_size=", kernel_size, ", stride=", stride, ", padding=", padding);
}

Tensor MaxPool2d::forward(const Tensor& input) { return max_pool2d(input, kernel_size, stride, padding); }

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + std::to_string(kernel_size) + ", stride=" + std::to_string(stride) +
         ", padding=" + std::to_string(padding) + ", dilation=1, ceil_mode=False";
}

Tensor Flatten::forward(const Tensor& input) { return input.flatten(start_dim, end_dim); }

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Dropout::Dropout(double p) : p(p) {
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "Dropout: the probability p has to be between 0 and 1, got ", p);
}

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p, is_training()); }

std::string Dropout::extra_repr() const { return "p=" + format_float(p) + ", inplace=False"; }

std::shared_ptr<Module> ReLU::clone_structure() const { return std::make_shared<ReLU>(inplace); }

std::shared_ptr<Module> MaxPool2d::clone_structure() const {
  return std::make_shared<MaxPool2d>(kernel_size, stride, padding);
}

std::shared_ptr<Module> Flatten::clone_structure() const { return std::make_shared<Flatten>(start_dim, end_dim); }

std::shared_ptr<Module> Dropout::clone_structure() const { return std::make_shared<Dropout>(p); }

}  // namespace lockstep
