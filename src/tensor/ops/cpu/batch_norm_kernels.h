/// \file
/// CPU kernels for batch normalisation, split the way PyTorch splits them for SyncBatchNorm
/// (torch.batch_norm_stats, batch_norm_elemt, batch_norm_backward_reduce,
/// batch_norm_backward_elemt, whose names the kernels here take): the per-channel reductions are separate functions from the
/// elementwise passes. SyncBatchNorm (chapter 6) reuses the elementwise passes unchanged and only
/// swaps what goes between them: it all-gathers every rank's (mean, invstd, count) and all-reduces
/// (sum_dy, sum_dy_xmu), so that each rank normalises with global statistics.
///
/// Shapes: input and gradients are (N, C) or (N, C, H, W), read as (N, C, S) with S = H * W
/// (S = 1 for 2-D input); per-channel tensors (mean, invstd, weight, bias, running_mean,
/// running_var, sum_dy, sum_dy_xmu) are (C). Sums are accumulated in double. An undefined
/// weight means 1 and an undefined bias means 0.
///
/// Dtypes: input, grad_output, out and grad_input share one dtype. For f32 and f64 the
/// per-channel tensors have it too; for f16 and bf16 they are all f32, PyTorch's mixed batch
/// norm (16-bit activations, f32 parameters and statistics, as autocast leaves BatchNorm2d):
/// the statistics kernels return f32, and the elementwise kernels compute in float and round
/// each output element to 16 bits once.
#pragma once

#include <cstdint>
#include <utility>

#include "tensor/tensor.h"

namespace lockstep::cpu {

/// Per-channel mean and invstd = 1 / sqrt(var + eps) of `input`, where var is the biased
/// variance (divided by the count N * S). Returns (mean, invstd), both (C), f32 for a 16-bit
/// input. A channel with no values gets mean 0 and var 0.
std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input, double eps);

/// invstd = 1 / sqrt(var + eps) for a (C) variance such as running_var: the eval-mode invstd.
Tensor batch_norm_invstd_kernel(const Tensor& var, double eps);

/// running = (1 - momentum) * running + momentum * batch, in place, for the mean and for the
/// variance; the batch variance is recovered from invstd and made unbiased (times
/// count / (count - 1)), exactly as PyTorch updates running_var. count = N * S must be > 1.
/// The running statistics are f32 or f64 (16-bit ones are refused: the op updates those in
/// f32 and rounds the result back itself).
void batch_norm_update_stats_kernel(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                                    const Tensor& invstd, double eps, int64_t count, double momentum);

/// out = (input - mean) * invstd * weight + bias, per channel. out: contiguous, input's shape.
void batch_norm_elemt_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                             const Tensor& bias, const Tensor& out);

/// The two per-channel sums the backward pass needs: sum_dy = sum of grad_output and
/// sum_dy_xmu = sum of grad_output * (input - mean), over (N, S). Returns (sum_dy, sum_dy_xmu),
/// both (C), f32 for a 16-bit input. From them: grad_bias = sum_dy and grad_weight =
/// sum_dy_xmu * invstd.
std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean);

/// The input gradient of training-mode batch norm, where the mean and variance depend on the
/// input too. With xhat = (input - mean) * invstd and n = count:
///     grad_input = weight * invstd * (grad_output - sum_dy / n - xhat * invstd * sum_dy_xmu / n)
/// which is the textbook (weight * invstd / n) * (n dy - sum(dy) - xhat * sum(dy * xhat)).
/// grad_input: contiguous, input's shape.
void batch_norm_backward_elemt_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                      const Tensor& invstd, const Tensor& weight, const Tensor& sum_dy,
                                      const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_input);

}  // namespace lockstep::cpu
