/// \file
/// Mixed precision's loss scaling kernel: unscaling the gradients and checking them for inf and
/// NaN in one pass (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`), which GradScaler
/// (amp/grad_scaler.h) runs through the dispatch point.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include <vector>

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// For every gradient g in `grads` (f32 or f64, any layout, on the CPU): g *= inv_scale, and
/// found_inf = 1 if any element of any g was inf or NaN before the multiply. `found_inf` is a
/// one-element f32 tensor on the gradients' device; it is only ever set, never cleared, so one
/// flag can collect the checks of several calls. Each element is read and written once.
void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale);

}  // namespace cpu

namespace cuda {

/// cpu::non_finite_check_and_unscale_kernel on the current CUDA device, queued on its current
/// stream: found_inf holds the answer once that stream reaches it (item() waits for it).
LOCKSTEP_CUDA_FN(void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                                          double inv_scale))

}  // namespace cuda

namespace kernels {

/// Unscales gradients and flags any inf or NaN among them, in one pass (GradScaler's unscale_).
inline constexpr auto non_finite_check_and_unscale =
    device_kernels(cpu::non_finite_check_and_unscale_kernel, cuda::non_finite_check_and_unscale_kernel);

}  // namespace kernels

}  // namespace lockstep
