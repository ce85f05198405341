/// \file
/// The CUDA kernel of mixed precision's loss scaling: the same function, parameters and result
/// as the CPU kernel in tensor/ops/cpu/amp_kernels.h (PyTorch's
/// `_amp_foreach_non_finite_check_and_unscale_`), with every tensor on one CUDA device.
///
/// It runs on the current CUDA device: the dispatch point (`kernels::name.call`,
/// tensor/ops/kernels/dispatch.h) makes the tensors' device current before it calls it.
#pragma once

#include <vector>

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// For every gradient g in `grads` (f32 or f64, any layout): g *= inv_scale, and found_inf = 1
/// if any element was inf or NaN before the multiply; `found_inf` is a one-element f32 tensor
/// on the same device, only ever set, never cleared. The work is queued on the device's current
/// stream: found_inf holds the answer once that stream reaches it (item() waits for it).
LOCKSTEP_CUDA_FN(void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                                          double inv_scale))

}  // namespace lockstep::cuda
