/// \file
/// Batch normalisation (torch.nn.functional.batch_norm): normalise every channel to zero mean
/// and unit variance over the batch (and the spatial positions), then scale and shift it by a
/// learned weight and bias. The per-channel kernels it is built from live in
/// tensor/ops/cpu/batch_norm_kernels.h, where SyncBatchNorm will reuse them.
#pragma once

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

}  // namespace lockstep
