/// \file
/// CUDA kernels for elementwise ops: the same functions, parameters and results as the CPU kernels
/// in tensor/ops/cpu/elementwise_kernels.h (BinaryOp and UnaryOp come from
/// tensor/ops/kernels/elementwise_ops.h); every tensor lives on one CUDA device. The per-element
/// formulas are shared with the CPU through tensor/ops/elementwise_math.h.
///
/// Every function here runs on the current CUDA device: the dispatch point
/// (`kernels::name.call`, tensor/ops/kernels/dispatch.h) makes the tensors' device current
/// before it calls one.
#pragma once

#include "core/cuda/api.h"
#include "tensor/ops/kernels/elementwise_ops.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

/// out = op(a, b) with broadcasting; a and b share a dtype (floating for arithmetic, f16 and
/// bf16 included, which are computed in float and rounded once; any numeric dtype for
/// comparisons, whose out is bool); `name` is the op's name for errors.
LOCKSTEP_CUDA_FN(void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b,
                                    const Tensor& out))
/// out = op(a); a floating (any layout; f16 and bf16 computed in float, rounded once), out with
/// a's shape and dtype (or `a` itself, as relu_ passes it); `name` as above.
LOCKSTEP_CUDA_FN(void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out))

}  // namespace lockstep::cuda
