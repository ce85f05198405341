/// \file
/// The kernels of batch normalisation, split the way PyTorch splits them for SyncBatchNorm
/// (torch.batch_norm_stats, batch_norm_elemt, batch_norm_backward_reduce,
/// batch_norm_backward_elemt, whose names the kernels here take): the per-channel reductions
/// are separate functions from the elementwise passes. SyncBatchNorm (chapter 6) reuses the elementwise passes unchanged and only
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
///
/// On a GPU nothing is read back to the host: the statistics stay there from the reduction to
/// the elementwise pass.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include <cstdint>
#include <utility>

#include "core/cuda/api.h"
#include "core/dtype.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

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

// SyncBatchNorm's two extra steps (torch.batch_norm_stats and
// torch.batch_norm_gather_stats_with_counts, reworked): each rank packs its statistics into one
// row, the rows of all ranks are all-gathered, and every rank merges them the same way.

/// This rank's per-channel statistics, packed as one row for SyncBatchNorm's all-gather: a
/// (2C + 1) f64 tensor on input's device,
///     [ mean (C) | biased variance (C) | count ],
/// count = N * S, the number of values each channel holds. Always f64, whatever the input's
/// dtype: the merge of several ranks then loses nothing to rounding, and the count stays
/// exact far beyond f32's 2^24. Mean and variance are taken in two passes, in double, as
/// batch_norm_stats_kernel does. An empty batch (N = 0) gives mean 0, variance 0 and count 0,
/// which the merge skips: a rank without images still joins the all-gather.
Tensor batch_norm_local_stats_kernel(const Tensor& input);

/// Merges every rank's row of `gathered` (R, 2C + 1) f64, as batch_norm_local_stats_kernel
/// packs them, into the statistics of the union of the ranks' batches: per channel, the rows
/// are combined by count with Chan, Golub and LeVeque's pairwise update of the mean and of the
/// sum of squared deviations M2, in double (rows of count 0 are skipped), and the global biased
/// variance is M2 / n for the total count n. Returns (mean, invstd = 1 / sqrt(var + eps)), both
/// (C) in `stat_dtype` (f32 or f64). When running_mean and running_var are defined (f32 or f64,
/// possibly strided) they are updated in place as batch_norm_update_stats_kernel does, with the
/// unbiased global variance M2 / (n - 1); n must then be > 1 (the op checks it).
std::pair<Tensor, Tensor> batch_norm_gather_stats_kernel(const Tensor& gathered, const Tensor& running_mean,
                                                         const Tensor& running_var, double momentum, double eps,
                                                         DType stat_dtype);

}  // namespace cpu

namespace cuda {

/// cpu::batch_norm_stats_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input, double eps))
/// cpu::batch_norm_invstd_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(Tensor batch_norm_invstd_kernel(const Tensor& var, double eps))
/// cpu::batch_norm_update_stats_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void batch_norm_update_stats_kernel(const Tensor& running_mean, const Tensor& running_var,
                                                     const Tensor& mean, const Tensor& invstd, double eps,
                                                     int64_t count, double momentum))
/// cpu::batch_norm_elemt_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void batch_norm_elemt_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd,
                                              const Tensor& weight, const Tensor& bias, const Tensor& out))
/// cpu::batch_norm_backward_reduce_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output,
                                                                             const Tensor& input, const Tensor& mean))
/// cpu::batch_norm_backward_elemt_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void batch_norm_backward_elemt_kernel(const Tensor& grad_output, const Tensor& input,
                                                       const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                                       const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                                                       const Tensor& grad_input))
/// cpu::batch_norm_local_stats_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(Tensor batch_norm_local_stats_kernel(const Tensor& input))
/// cpu::batch_norm_gather_stats_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(std::pair<Tensor, Tensor> batch_norm_gather_stats_kernel(const Tensor& gathered,
                                                                          const Tensor& running_mean,
                                                                          const Tensor& running_var, double momentum,
                                                                          double eps, DType stat_dtype))

}  // namespace cuda

namespace kernels {

/// Per-channel mean and invstd of a batch.
inline constexpr auto batch_norm_stats = device_kernels(cpu::batch_norm_stats_kernel, cuda::batch_norm_stats_kernel);
/// invstd from a variance.
inline constexpr auto batch_norm_invstd = device_kernels(cpu::batch_norm_invstd_kernel, cuda::batch_norm_invstd_kernel);
/// The running statistics' update.
inline constexpr auto batch_norm_update_stats =
    device_kernels(cpu::batch_norm_update_stats_kernel, cuda::batch_norm_update_stats_kernel);
/// The normalisation and affine map.
inline constexpr auto batch_norm_elemt = device_kernels(cpu::batch_norm_elemt_kernel, cuda::batch_norm_elemt_kernel);
/// The backward pass's per-channel sums.
inline constexpr auto batch_norm_backward_reduce =
    device_kernels(cpu::batch_norm_backward_reduce_kernel, cuda::batch_norm_backward_reduce_kernel);
/// The training-mode input gradient.
inline constexpr auto batch_norm_backward_elemt =
    device_kernels(cpu::batch_norm_backward_elemt_kernel, cuda::batch_norm_backward_elemt_kernel);
/// SyncBatchNorm: one rank's statistics packed for the all-gather, (mean, var, count).
inline constexpr auto batch_norm_local_stats =
    device_kernels(cpu::batch_norm_local_stats_kernel, cuda::batch_norm_local_stats_kernel);
/// SyncBatchNorm: every rank's packed statistics merged by count, running statistics updated.
inline constexpr auto batch_norm_gather_stats =
    device_kernels(cpu::batch_norm_gather_stats_kernel, cuda::batch_norm_gather_stats_kernel);

}  // namespace kernels

}  // namespace lockstep
