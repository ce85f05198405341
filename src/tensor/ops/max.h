/// \file
/// The largest element and where it is: torch.max(a), torch.max(a, dim) and torch.argmax.
///
/// Conventions, as in PyTorch: ties go to the first occurrence; a NaN counts as larger than
/// every number, so a row holding a NaN has max NaN and argmax the position of its first NaN.
/// The gradient of max(a, dim) flows only to the position that was selected; the overall
/// max(a) returns no position, and splits its gradient evenly among all elements equal to the
/// maximum (all NaNs, if it is NaN).
#pragma once

#include <utility>

#include "tensor/tensor.h"

namespace lockstep {

/// The largest element of `a` as a 0-d tensor (differentiable). Works for f32, f64, i64, i32
/// and u8; `a` must not be empty.
Tensor max(const Tensor& a);

/// The largest elements along `dim` and their positions, like `torch.max(a, dim)`: returns
/// (values, indices) with `dim` removed (or kept with size 1 if `keepdim`). values has a's
/// dtype and is differentiable; indices is i64.
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);

/// The positions of the largest elements along `dim` (i64, first occurrence on ties), with
/// `dim` removed or kept with size 1; the indices of max(a, dim). Not differentiable.
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);

}  // namespace lockstep
