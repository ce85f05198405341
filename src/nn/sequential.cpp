#include "nn/sequential.h"

#include <string>

#include "core/error.h"

namespace lockstep {

void Sequential::push_back(std::shared_ptr<Module> module) { register_module(std::to_string(size()), std::move(module)); }

std::shared_ptr<Module> Sequential::operator[](size_t index) const {
  const auto modules = children();
  LOCKSTEP_CHECK(index < modules.size(), "Sequential: index ", index, " is out of range for a Sequential of ",
                 modules.size(), " modules");
  return modules[index];
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& module : children()) x = (*module)(x);
  return x;
}

std::shared_ptr<Module> Sequential::clone_structure() const {
  auto copy = std::make_shared<Sequential>();
  for (const auto& child : children()) copy->push_back(child->clone_structure());
  return copy;
}

}  // namespace lockstep
