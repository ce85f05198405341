/// \file
/// Dropout (torch.nn.functional.dropout): during training, zero each element with
/// probability p, so that no unit can rely on any other being present.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// Inverted dropout, as in PyTorch: in training each element of `input` is zeroed with
/// probability `p` and the survivors are scaled by 1 / (1 - p), so the expected value of every
/// element is unchanged and evaluation needs no rescaling. The keep/drop mask is drawn by the
/// counter-based generator Philox (tensor/ops/rules/philox.h) from one 64-bit draw of
/// `generator` (the default generator if null) and each element's row-major index, so a seed
/// fixes the mask, on the CPU and a GPU alike. When `p` is 0 or `training` is false the input
/// itself is returned; p = 1 gives zeros. The gradient is the output gradient times the same scaled mask.
/// `p` must lie in [0, 1]. The mask and the output have the input's dtype: dropout of a bf16
/// tensor is bf16, its survivors multiplied by the scale rounded to bf16.
Tensor dropout(const Tensor& input, double p, bool training, Generator* generator = nullptr);

}  // namespace lockstep
