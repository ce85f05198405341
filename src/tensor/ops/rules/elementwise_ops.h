/// \file
/// The elementwise functions both backends' kernels apply: the CPU kernels
/// (tensor/ops/dispatch/elementwise_kernels.h) and the CUDA kernels (tensor/ops/cuda/) take one of
/// these and run its formula from tensor/ops/rules/elementwise_math.h.
#pragma once

namespace lockstep {

/// The binary elementwise functions. The *Backward entries take (grad, saved output).
enum class BinaryOp {
  Add, Sub, Mul, Div,
  SigmoidBackward,  ///< grad * out * (1 - out)
  TanhBackward,     ///< grad * (1 - out^2)
  Eq, Ne, Lt, Le, Gt, Ge  ///< comparisons: out is bool
};

/// The unary elementwise functions.
enum class UnaryOp { Neg, Exp, Log, Relu, Sigmoid, Tanh };

}  // namespace lockstep
