/// \file
/// CUDA kernels for batch normalisation: the same eight functions, parameters and results as the
/// CPU kernels in tensor/ops/cpu/batch_norm_kernels.h (see there for the split that SyncBatchNorm
/// relies on). Input and gradients are (N, C) or (N, C, H, W), read as (N, C, S); per-channel
/// tensors are (C) with the input's dtype for f32 and f64 input, and f32 for f16 and bf16 input
/// (whose elements are computed in float and rounded once); every tensor lives on one CUDA
/// device.
/// Per-channel sums are accumulated in double, as on the CPU, and nothing is read back to the
/// host: the statistics stay on the GPU from the reduction to the elementwise pass.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include <cstdint>
#include <utility>

#include "core/cuda/api.h"
#include "core/dtype.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// Per-channel mean and invstd = 1 / sqrt(var + eps) of `input` (biased variance); returns
/// (mean, invstd), both (C), f32 for a 16-bit input. A channel with no values gets mean 0 and
/// var 0.
LOCKSTEP_CUDA_FN(std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input, double eps))

/// invstd = 1 / sqrt(var + eps) for a (C) variance such as running_var.
LOCKSTEP_CUDA_FN(Tensor batch_norm_invstd_kernel(const Tensor& var, double eps))

/// running = (1 - momentum) * running + momentum * batch, in place, for the mean and for the
/// unbiased variance (recovered from invstd, times count / (count - 1)); count must be > 1.
LOCKSTEP_CUDA_FN(void batch_norm_update_stats_kernel(const Tensor& running_mean, const Tensor& running_var,
                                                     const Tensor& mean, const Tensor& invstd, double eps,
                                                     int64_t count, double momentum))

/// out = (input - mean) * invstd * weight + bias, per channel; out: contiguous, input's shape.
/// An undefined weight means 1 and an undefined bias means 0.
LOCKSTEP_CUDA_FN(void batch_norm_elemt_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd,
                                              const Tensor& weight, const Tensor& bias, const Tensor& out))

/// Per-channel sum_dy = sum of grad_output and sum_dy_xmu = sum of grad_output * (input - mean)
/// over (N, S); returns (sum_dy, sum_dy_xmu), both (C), f32 for a 16-bit input.
LOCKSTEP_CUDA_FN(std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output,
                                                                             const Tensor& input, const Tensor& mean))

/// The training-mode input gradient, with xhat = (input - mean) * invstd and n = count:
///     grad_input = weight * invstd * (grad_output - sum_dy / n - xhat * invstd * sum_dy_xmu / n).
/// grad_input: contiguous, input's shape. An undefined weight means 1.
LOCKSTEP_CUDA_FN(void batch_norm_backward_elemt_kernel(const Tensor& grad_output, const Tensor& input,
                                                       const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                                       const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                                                       const Tensor& grad_input))

/// SyncBatchNorm's packed row of this rank's statistics: (2C + 1) f64 on input's device,
/// [ mean (C) | biased variance (C) | count ], count = N * S; see
/// cpu::batch_norm_local_stats_kernel. An empty batch gives zeros (count 0).
LOCKSTEP_CUDA_FN(Tensor batch_norm_local_stats_kernel(const Tensor& input))

/// Merges the ranks' rows of `gathered` (R, 2C + 1) f64 by count (Chan et al., in double,
/// rows of count 0 skipped) into the global (mean, invstd), (C) in `stat_dtype`, and updates
/// running_mean and running_var in place, if defined, with the unbiased global variance; see
/// cpu::batch_norm_gather_stats_kernel.
LOCKSTEP_CUDA_FN(std::pair<Tensor, Tensor> batch_norm_gather_stats_kernel(const Tensor& gathered,
                                                                          const Tensor& running_mean,
                                                                          const Tensor& running_var, double momentum,
                                                                          double eps, DType stat_dtype))

}  // namespace lockstep::cuda
