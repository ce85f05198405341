/// \file
/// Sums and means over all or some dimensions (torch.sum / torch.mean), and sum_to, the
/// reduction that undoes broadcasting in backward passes.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// Sum of all elements, as a 0-d tensor (i64 for integer and bool tensors, as in PyTorch). An
/// f16 or bf16 sum is accumulated in double and keeps a's dtype, so an f16 sum past 65504 is inf.
Tensor sum(const Tensor& a);
/// Sum over `dims` (negative dims count from the end); `keepdim` keeps them with size 1.
Tensor sum(const Tensor& a, const Shape& dims, bool keepdim = false);
/// Mean of all elements, as a 0-d tensor. An f16 or bf16 mean is computed in f32 (a copy of
/// `a`) and rounded to a's dtype once, as in PyTorch.
Tensor mean(const Tensor& a);
/// Mean over `dims`; `keepdim` keeps them with size 1.
Tensor mean(const Tensor& a, const Shape& dims, bool keepdim = false);
/// Sums `a` down to `shape`, which `a`'s shape must broadcast from: the gradient of an input
/// that was broadcast to `a`'s shape. Returns `a` itself when the shapes already match.
Tensor sum_to(const Tensor& a, const Shape& shape);

}  // namespace lockstep
