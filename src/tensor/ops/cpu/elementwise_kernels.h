/// \file
/// CPU kernels for elementwise ops. Each writes into a preallocated contiguous `out` whose
/// shape is the broadcast shape of the inputs; inputs may have any strides.
#pragma once

#include "tensor/ops/kernels/elementwise_ops.h"
#include "tensor/tensor.h"

namespace lockstep::cpu {

/// out = op(a, b) with broadcasting; a and b share a floating dtype (out is bool for
/// comparisons); `name` is the op's name for error messages.
void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
/// out = op(a); a floating, out with a's shape and dtype (contiguous, or `a` itself: each element
/// is read before it is written, which relu_ relies on); `name` as above.
void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out);

}  // namespace lockstep::cpu
