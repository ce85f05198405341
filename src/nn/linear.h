/// \file
/// Linear, the fully connected layer (torch.nn.Linear): y = x W^T + b.
#pragma once

#include <cstdint>
#include <string>

#include "core/generator.h"
#include "nn/module.h"

namespace lockstep {

/// A fully connected layer, y = x W^T + b, like torch.nn.Linear. Input (..., in_features),
/// output (..., out_features). Parameters: `weight` (out_features, in_features) and, unless
/// `bias` is false, `bias` (out_features).
class Linear : public Module {
 public:
  /// A layer with PyTorch's default initialisation (see reset_parameters).
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  /// x: (..., in_features) -> (..., out_features).
  Tensor forward(const Tensor& input) override;
  /// A new Linear with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// Re-draws the parameters as PyTorch does: weight kaiming_uniform_(a = sqrt(5)), bias
  /// uniform in +-1/sqrt(in_features), from `generator` (the default generator if null).
  void reset_parameters(Generator* generator = nullptr);
  /// "in_features=784, out_features=256, bias=True".
  std::string extra_repr() const override;

  int64_t in_features;   ///< Size of each input row.
  int64_t out_features;  ///< Size of each output row.
  Tensor weight;         ///< (out_features, in_features).
  Tensor bias;           ///< (out_features), or undefined for a layer without bias.
};

}  // namespace lockstep
