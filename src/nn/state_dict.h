/// \file
/// A state dict: a module's parameters and buffers by dotted name, in registration order, as
/// PyTorch's `state_dict()` returns them (`features.0.weight`, `bn1.running_mean`, ...).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// Named tensors in order. A vector of pairs rather than a map, because order is part of the
/// format (it is the order PyTorch prints and saves them in).
using StateDict = std::vector<std::pair<std::string, Tensor>>;

}  // namespace lockstep
