/// \file
/// Clearing gradients before the next backward pass, shared by Module::zero_grad and
/// Optimizer::zero_grad (in PyTorch, too, both do the same thing to the same tensors).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// For each tensor with a gradient: drop it (`set_to_none`, PyTorch's default since 2.0, so
/// the next backward writes a fresh buffer) or fill it with zeros (the next backward adds in).
void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none = true);

}  // namespace lockstep
