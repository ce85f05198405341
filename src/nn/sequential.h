/// \file
/// Sequential (torch.nn.Sequential): modules applied one after another, named "0", "1", ...
#pragma once

#include <cstddef>
#include <memory>

#include "nn/module.h"

namespace lockstep {

/// A chain of modules, like torch.nn.Sequential: forward feeds the input through each child
/// in order. Children are registered as "0", "1", ..., so a Linear at position 1 owns the
/// state_dict keys "1.weight" and "1.bias", exactly as in PyTorch.
///
///     auto mlp = std::make_shared<Sequential>(std::make_shared<Flatten>(),
///                                             std::make_shared<Linear>(784, 10));
class Sequential : public Module {
 public:
  /// A chain of the given modules, in order (none gives an empty chain, the identity).
  template <class... Modules>
  explicit Sequential(std::shared_ptr<Modules>... modules) {
    (push_back(std::move(modules)), ...);
  }

  /// Appends `module` under the next index as its name.
  void push_back(std::shared_ptr<Module> module);
  /// Number of modules in the chain.
  size_t size() const { return children().size(); }
  /// The module at `index` (0-based); throws when out of range.
  std::shared_ptr<Module> operator[](size_t index) const;
  /// Applies every module in turn: x -> m0(x) -> m1(m0(x)) -> ...
  Tensor forward(const Tensor& input) override;
  /// A new Sequential with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
};

}  // namespace lockstep
