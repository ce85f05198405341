/// \file
/// CUDA kernels for softmax and log_softmax along one dimension (forward and backward). Same
/// functions, parameters and results as the CPU kernels in tensor/ops/cpu/softmax_kernels.h;
/// every tensor lives on one CUDA device.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include "core/cuda/api.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// out = softmax(x) (or log_softmax(x) if `log`) along `dim`. `x` is floating (f32, f64, f16 or
/// bf16; a 16-bit line is computed in float and each result rounded once), any layout; `out`
/// is contiguous with x's shape and dtype.
LOCKSTEP_CUDA_FN(void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out))

/// The gradient of softmax_kernel from the saved output y and the output gradient dy:
/// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy), the sums
/// along `dim`. `grad` and `out` may have any layout; `grad_input` is contiguous.
LOCKSTEP_CUDA_FN(void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log,
                                              const Tensor& grad_input))

}  // namespace lockstep::cuda
