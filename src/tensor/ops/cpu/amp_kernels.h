/// \file
/// The CPU kernel of mixed precision's loss scaling: unscaling the gradients and checking them
/// for inf and NaN in one pass (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`).
/// GradScaler (amp/grad_scaler.h) runs it through the dispatch point; tensor/ops/cuda/amp_kernels.h
/// is the same function on a GPU.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace lockstep::cpu {

/// For every gradient g in `grads` (f32 or f64, any layout, on the CPU): g *= inv_scale, and
/// found_inf = 1 if any element of any g was inf or NaN before the multiply. `found_inf` is a
/// one-element f32 tensor on the gradients' device; it is only ever set, never cleared, so one
/// flag can collect the checks of several calls. Each element is read and written once.
void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale);

}  // namespace lockstep::cpu
