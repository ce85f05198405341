#include "nn/linear.h"

#include "core/error.h"
#include "nn/init.h"
#include "tensor/ops/matmul.h"

namespace lockstep {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features(in_features), out_features(out_features) {
  LOCKSTEP_CHECK(in_features > 0 && out_features > 0, "Linear: expected positive in_features and out_features, got ",
                 in_features, " and ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (bias) this->bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters(Generator* generator) {
  reset_weight_and_bias_(weight, bias, generator);
}

Tensor Linear::forward(const Tensor& input) {
  LOCKSTEP_CHECK(input.dim() >= 1 && input.size(-1) == in_features, "Linear: expected input of shape (..., ",
                 in_features, "), got ", shape_str(input.shape()));
  return linear(input, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

std::shared_ptr<Module> Linear::clone_structure() const {
  return std::make_shared<Linear>(in_features, out_features, bias.defined());
}

}  // namespace lockstep
