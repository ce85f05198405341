/// \file
/// CPU kernels for elementwise ops. Each writes into a preallocated contiguous `out` whose
/// shape is the broadcast shape of the inputs; inputs may have any strides.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// The binary elementwise functions. The *Backward entries take (grad, saved output).
enum class BinaryOp {
  Add, Sub, Mul, Div,
  ReluBackward,     ///< grad where out > 0 or NaN, else 0
  SigmoidBackward,  ///< grad * out * (1 - out)
  TanhBackward,     ///< grad * (1 - out^2)
  Eq, Ne, Lt, Le, Gt, Ge  ///< comparisons: out is bool
};

/// The unary elementwise functions.
enum class UnaryOp { Neg, Exp, Log, Relu, Sigmoid, Tanh };

namespace cpu {
/// out = op(a, b) with broadcasting; a and b share a floating dtype (out is bool for
/// comparisons); `name` is the op's name for error messages.
void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
/// out = op(a); a floating, out contiguous with a's shape and dtype; `name` as above.
void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out);
}  // namespace cpu

}  // namespace lockstep
