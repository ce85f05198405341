/// \file
/// Joining tensors: cat (end to end along an existing dimension) and stack (side by side
/// along a new one), as torch.cat and torch.stack. Both copy into a new tensor, and both are
/// differentiable: each input's gradient is its own slice of the output's gradient.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// Concatenates `tensors` along `dim` (negative counts from the end). All must share dtype,
/// device and number of dimensions (at least 1), and have equal sizes in every other
/// dimension; sizes along `dim` may differ. Unlike PyTorch, no dtype promotion is done, and
/// 1-D empty tensors get no special treatment.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);

/// Stacks equally shaped `tensors` along a new dimension inserted at `dim` (0 to dim() of the
/// inputs, or negative): stacking three [2, 3] tensors at dim 0 gives [3, 2, 3], at dim -1
/// [2, 3, 3]. The same as unsqueezing each at `dim` and concatenating.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace lockstep
