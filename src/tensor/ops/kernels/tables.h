/// \file
/// Every kernel pair of the tensor library, in one place: each entry joins `cpu::name_kernel`
/// and `cuda::name_kernel`, which share one signature (the compiler checks it here), and an op
/// runs the kernel of its tensors' device with `kernels::name.call(device, args...)`
/// (dispatch.h). A backend added to DeviceKernels gets its kernels listed here, and no op
/// changes. Each kernel's contract is documented in its CPU header.
#pragma once

#include "tensor/cpu/copy_kernels.h"
#include "tensor/cuda/copy_kernels.h"
#include "tensor/ops/cpu/amp_kernels.h"
#include "tensor/ops/cpu/batch_norm_kernels.h"
#include "tensor/ops/cpu/conv_kernels.h"
#include "tensor/ops/cpu/dropout_kernels.h"
#include "tensor/ops/cpu/elementwise_kernels.h"
#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/cpu/loss_kernels.h"
#include "tensor/ops/cpu/max_kernels.h"
#include "tensor/ops/cpu/pool_kernels.h"
#include "tensor/ops/cpu/reduce_kernels.h"
#include "tensor/ops/cpu/relu_kernels.h"
#include "tensor/ops/cpu/softmax_kernels.h"
#include "tensor/ops/cuda/amp_kernels.h"
#include "tensor/ops/cuda/batch_norm_kernels.h"
#include "tensor/ops/cuda/conv_kernels.h"
#include "tensor/ops/cuda/dropout_kernels.h"
#include "tensor/ops/cuda/elementwise_kernels.h"
#include "tensor/ops/cuda/gemm.h"
#include "tensor/ops/cuda/loss_kernels.h"
#include "tensor/ops/cuda/max_kernels.h"
#include "tensor/ops/cuda/pool_kernels.h"
#include "tensor/ops/cuda/reduce_kernels.h"
#include "tensor/ops/cuda/relu_kernels.h"
#include "tensor/ops/cuda/softmax_kernels.h"
#include "tensor/ops/kernels/dispatch.h"

namespace lockstep::kernels {

// Tensor's own building blocks (tensor/copy.h).
/// dst = src, converting the dtype (copy_, contiguous, to(dtype)).
inline constexpr DeviceKernels<decltype(cpu::copy_kernel)> copy{cpu::copy_kernel, cuda::copy_kernel};
/// dst = value (fill_).
inline constexpr DeviceKernels<decltype(cpu::fill_kernel)> fill{cpu::fill_kernel, cuda::fill_kernel};
/// dst += alpha * src (add_).
inline constexpr DeviceKernels<decltype(cpu::axpy_kernel)> axpy{cpu::axpy_kernel, cuda::axpy_kernel};
/// dst *= value (mul_).
inline constexpr DeviceKernels<decltype(cpu::scale_kernel)> scale{cpu::scale_kernel, cuda::scale_kernel};

// Elementwise ops.
/// out = op(a, b) with broadcasting.
inline constexpr DeviceKernels<decltype(cpu::binary_kernel)> binary{cpu::binary_kernel, cuda::binary_kernel};
/// out = op(a).
inline constexpr DeviceKernels<decltype(cpu::unary_kernel)> unary{cpu::unary_kernel, cuda::unary_kernel};
/// relu, and the mask of what it let through (tensor/ops/kernels/relu_mask.h).
inline constexpr DeviceKernels<decltype(cpu::relu_kernel)> relu{cpu::relu_kernel, cuda::relu_kernel};
/// relu's gradient, from that mask.
inline constexpr DeviceKernels<decltype(cpu::relu_backward_kernel)> relu_backward{cpu::relu_backward_kernel,
                                                                                 cuda::relu_backward_kernel};
/// Dropout's mask (the same Philox mask on both devices, tensor/ops/rules/philox.h).
inline constexpr DeviceKernels<decltype(cpu::dropout_mask_kernel)> dropout_mask{cpu::dropout_mask_kernel,
                                                                               cuda::dropout_mask_kernel};

// Reductions.
/// Sum over a set of dimensions.
inline constexpr DeviceKernels<decltype(cpu::sum_kernel)> sum{cpu::sum_kernel, cuda::sum_kernel};
/// Max and its position along one dimension.
inline constexpr DeviceKernels<decltype(cpu::max_kernel)> max{cpu::max_kernel, cuda::max_kernel};
/// The gradient of max along one dimension.
inline constexpr DeviceKernels<decltype(cpu::max_backward_kernel)> max_backward{cpu::max_backward_kernel,
                                                                               cuda::max_backward_kernel};

// Softmax and the losses built on it.
/// softmax or log_softmax along one dimension.
inline constexpr DeviceKernels<decltype(cpu::softmax_kernel)> softmax{cpu::softmax_kernel, cuda::softmax_kernel};
/// The gradient of softmax or log_softmax.
inline constexpr DeviceKernels<decltype(cpu::softmax_backward_kernel)> softmax_backward{
    cpu::softmax_backward_kernel, cuda::softmax_backward_kernel};
/// Cross entropy with mean reduction.
inline constexpr DeviceKernels<decltype(cpu::cross_entropy_kernel)> cross_entropy{cpu::cross_entropy_kernel,
                                                                                 cuda::cross_entropy_kernel};
/// The gradient of cross entropy.
inline constexpr DeviceKernels<decltype(cpu::cross_entropy_backward_kernel)> cross_entropy_backward{
    cpu::cross_entropy_backward_kernel, cuda::cross_entropy_backward_kernel};
/// Negative log-likelihood with mean reduction.
inline constexpr DeviceKernels<decltype(cpu::nll_loss_kernel)> nll_loss{cpu::nll_loss_kernel,
                                                                       cuda::nll_loss_kernel};
/// The gradient of the negative log-likelihood.
inline constexpr DeviceKernels<decltype(cpu::nll_loss_backward_kernel)> nll_loss_backward{
    cpu::nll_loss_backward_kernel, cuda::nll_loss_backward_kernel};

// Matrix products and the layers built on them.
/// C = alpha A B + beta C on strided operands, in element type T (float or double).
template <class T>
inline constexpr DeviceKernels<decltype(cpu::gemm<T>)> gemm{cpu::gemm<T>, cuda::gemm};
/// C (f32) = alpha A B + beta C with f16 or bf16 operands A and B (T = Half or BFloat16).
template <class T>
inline constexpr DeviceKernels<decltype(cpu::gemm_16bit<T>)> gemm_16bit{cpu::gemm_16bit<T>, cuda::gemm};
/// conv2d's forward pass.
inline constexpr DeviceKernels<decltype(cpu::conv2d_forward_kernel)> conv2d_forward{cpu::conv2d_forward_kernel,
                                                                                   cuda::conv2d_forward_kernel};
/// conv2d's backward pass.
inline constexpr DeviceKernels<decltype(cpu::conv2d_backward_kernel)> conv2d_backward{
    cpu::conv2d_backward_kernel, cuda::conv2d_backward_kernel};
/// max_pool2d's forward pass.
inline constexpr DeviceKernels<decltype(cpu::max_pool2d_kernel)> max_pool2d{cpu::max_pool2d_kernel,
                                                                           cuda::max_pool2d_kernel};
/// max_pool2d's backward pass.
inline constexpr DeviceKernels<decltype(cpu::max_pool2d_backward_kernel)> max_pool2d_backward{
    cpu::max_pool2d_backward_kernel, cuda::max_pool2d_backward_kernel};

// Batch normalisation, in the pieces SyncBatchNorm recombines.
/// Per-channel mean and invstd of a batch.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_stats_kernel)> batch_norm_stats{
    cpu::batch_norm_stats_kernel, cuda::batch_norm_stats_kernel};
/// invstd from a variance.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_invstd_kernel)> batch_norm_invstd{
    cpu::batch_norm_invstd_kernel, cuda::batch_norm_invstd_kernel};
/// The running statistics' update.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_update_stats_kernel)> batch_norm_update_stats{
    cpu::batch_norm_update_stats_kernel, cuda::batch_norm_update_stats_kernel};
/// The normalisation and affine map.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_elemt_kernel)> batch_norm_elemt{
    cpu::batch_norm_elemt_kernel, cuda::batch_norm_elemt_kernel};
/// The backward pass's per-channel sums.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_backward_reduce_kernel)> batch_norm_backward_reduce{
    cpu::batch_norm_backward_reduce_kernel, cuda::batch_norm_backward_reduce_kernel};
/// The training-mode input gradient.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_backward_elemt_kernel)> batch_norm_backward_elemt{
    cpu::batch_norm_backward_elemt_kernel, cuda::batch_norm_backward_elemt_kernel};
/// SyncBatchNorm: one rank's statistics packed for the all-gather, (mean, var, count).
inline constexpr DeviceKernels<decltype(cpu::batch_norm_local_stats_kernel)> batch_norm_local_stats{
    cpu::batch_norm_local_stats_kernel, cuda::batch_norm_local_stats_kernel};
/// SyncBatchNorm: every rank's packed statistics merged by count, running statistics updated.
inline constexpr DeviceKernels<decltype(cpu::batch_norm_gather_stats_kernel)> batch_norm_gather_stats{
    cpu::batch_norm_gather_stats_kernel, cuda::batch_norm_gather_stats_kernel};

// Mixed precision.
/// Unscales gradients and flags any inf or NaN among them, in one pass (GradScaler's unscale_).
inline constexpr DeviceKernels<decltype(cpu::non_finite_check_and_unscale_kernel)> non_finite_check_and_unscale{
    cpu::non_finite_check_and_unscale_kernel, cuda::non_finite_check_and_unscale_kernel};

}  // namespace lockstep::kernels
