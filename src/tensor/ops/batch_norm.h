/// \file
/// Batch normalisation (torch.nn.functional.batch_norm): normalise every channel to zero mean
/// and unit variance over the batch (and the spatial positions), then scale and shift it by a
/// learned weight and bias. The per-channel kernels it is built from live in
/// tensor/ops/dispatch/batch_norm_kernels.h, where sync_batch_norm, the op under SyncBatchNorm,
/// reuses them between its collectives.
#pragma once

#include <functional>

#include "tensor/tensor.h"

namespace lockstep {

/// Batch norm of `input` (N, C) or (N, C, H, W):
///     out = (input - mean) / sqrt(var + eps) * weight + bias,   per channel c.
/// In training, mean and the biased var are the batch's, over N (and H, W), and the running
/// statistics are updated in place, without autograd:
///     running_mean = (1 - momentum) * running_mean + momentum * mean
///     running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)
/// (the unbiased variance, n values per channel), exactly as PyTorch. In eval mode
/// (`training` false) running_mean and running_var are used instead. `weight` and `bias`
/// (C) may be undefined (no affine transform: weight 1, bias 0); running_mean and
/// running_var (C) may both be undefined, and then the batch statistics are always used.
/// Gradients flow to input, weight and bias. All tensors share one device and, for f32 and f64
/// input, one dtype. An f16 or bf16 input is PyTorch's mixed batch norm: the output has the
/// input's dtype, the statistics are computed and kept in f32, and the per-channel tensors may
/// be f32 (as autocast leaves BatchNorm2d) or the input's dtype (a model converted with
/// `.to(DType::bf16)`; they are converted to f32 for the computation, and 16-bit running
/// statistics are updated in f32 and rounded back once).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

/// The two collectives sync_batch_norm needs, supplied by its caller (SyncBatchNorm, which owns
/// a process group: the tensor library knows no ranks). Every rank of the group must call each
/// of them the same number of times, in the same order.
struct BatchNormCollectives {
  /// Given this rank's packed statistics `local` (1, 2C + 1) f64, returns every rank's rows
  /// (world, 2C + 1), rank 0's first, on every rank: an all-gather.
  std::function<Tensor(const Tensor& local)> all_gather;
  /// Replaces `sums` (2C), this rank's (sum_dy | sum_dy_xmu), by their sum over the ranks, in
  /// place: an all-reduce.
  std::function<void(const Tensor& sums)> all_reduce_sum;
};

/// Training-mode batch norm over the union of every rank's batch (torch.nn.SyncBatchNorm's
/// forward and backward): the same formula and arguments as batch_norm(..., training = true),
/// but the mean and variance are those of all ranks' inputs together, so each rank's output is
/// its slice of what one process would compute on the concatenated batch.
///   - forward: this rank's per-channel (mean, biased variance, count) are packed into one row
///     and all-gathered; every rank merges the rows by count (Chan's parallel algorithm) into
///     the global mean and biased variance, normalises with them, and updates running_mean and
///     running_var with the global mean and the unbiased global variance (total count n - 1).
///   - backward: the per-channel sums of dy and dy * (x - mean) are all-reduced (one packed
///     tensor) and the input gradient uses the global count. The weight and bias gradients are
///     this rank's own sums, as in PyTorch: DistributedDataParallel averages them afterwards.
///     The all-reduce runs only when the input needs a gradient (as PyTorch's), which every
///     rank of a model decides alike.
/// A rank with an empty batch (N = 0) takes part in both collectives and contributes nothing.
/// The total count over the ranks must be more than 1 value per channel, or every rank throws.
/// The statistics are f32 for an f16 or bf16 input (PyTorch's mixed batch norm) and of the
/// input's dtype otherwise; the packed row is f64 on the input's device. The total count is
/// read back to the host (a small device-to-host copy) because the input gradient needs it.
Tensor sync_batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const BatchNormCollectives& collectives);

}  // namespace lockstep
