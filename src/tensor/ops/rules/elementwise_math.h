/// \file
/// The per-element formulas of the elementwise ops, written once for both backends: the CPU kernels
/// (tensor/ops/cpu/elementwise_kernels.cpp) and the CUDA kernels
/// (tensor/ops/cuda/elementwise_kernels.cu) run the same BinaryFn / UnaryFn, so the two cannot
/// compute different things.
///
/// Kernels are templates on the function, so that the compiler inlines it into the inner loop;
/// dispatch_arithmetic / dispatch_comparison / dispatch_unary turn the runtime BinaryOp or
/// UnaryOp into that compile-time choice, the way dispatch_floating does for dtypes.
#pragma once

#include <cmath>

#include "core/error.h"
#include "core/host_device.h"
#include "tensor/ops/rules/elementwise_ops.h"

namespace lockstep {

/// out = op(x, y) for one element. Arithmetic ops return T; comparisons return bool.
template <BinaryOp op>
struct BinaryFn {
  /// Applies the op to one pair of elements.
  template <class T>
  LOCKSTEP_HOST_DEVICE auto operator()(T x, T y) const {
    if constexpr (op == BinaryOp::Add) return x + y;
    else if constexpr (op == BinaryOp::Sub) return x - y;
    else if constexpr (op == BinaryOp::Mul) return x * y;
    else if constexpr (op == BinaryOp::Div) return x / y;
    // The activations' backward rules, given the incoming gradient g = x and the saved output y.
    // (ReLU's keeps a mask instead: tensor/ops/rules/relu_mask.h.)
    else if constexpr (op == BinaryOp::SigmoidBackward) return x * y * (T(1) - y);
    else if constexpr (op == BinaryOp::TanhBackward) return x * (T(1) - y * y);
    else if constexpr (op == BinaryOp::Eq) return x == y;
    else if constexpr (op == BinaryOp::Ne) return x != y;
    else if constexpr (op == BinaryOp::Lt) return x < y;
    else if constexpr (op == BinaryOp::Le) return x <= y;
    else if constexpr (op == BinaryOp::Gt) return x > y;
    else return x >= y;  // BinaryOp::Ge
  }
};

/// out = op(x) for one element (floating T). std:: math functions also compile for the GPU.
template <UnaryOp op>
struct UnaryFn {
  /// Applies the op to one element.
  template <class T>
  LOCKSTEP_HOST_DEVICE T operator()(T x) const {
    if constexpr (op == UnaryOp::Neg) return -x;
    else if constexpr (op == UnaryOp::Exp) return std::exp(x);
    else if constexpr (op == UnaryOp::Log) return std::log(x);
    else if constexpr (op == UnaryOp::Relu) return x <= T(0) ? T(0) : x;  // NaN stays NaN
    else if constexpr (op == UnaryOp::Sigmoid) return T(1) / (T(1) + std::exp(-x));
    else return std::tanh(x);  // UnaryOp::Tanh
  }
};

/// Calls `fn(BinaryFn<op>{})` for an arithmetic op (the output has the inputs' dtype); throws
/// for a comparison, which needs a bool output.
template <class Fn>
decltype(auto) dispatch_arithmetic(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::Add: return fn(BinaryFn<BinaryOp::Add>{});
    case BinaryOp::Sub: return fn(BinaryFn<BinaryOp::Sub>{});
    case BinaryOp::Mul: return fn(BinaryFn<BinaryOp::Mul>{});
    case BinaryOp::Div: return fn(BinaryFn<BinaryOp::Div>{});
    case BinaryOp::SigmoidBackward: return fn(BinaryFn<BinaryOp::SigmoidBackward>{});
    case BinaryOp::TanhBackward: return fn(BinaryFn<BinaryOp::TanhBackward>{});
    default: throw Error("binary_kernel: a comparison op needs a bool output");
  }
}

/// Calls `fn(BinaryFn<op>{})` for a comparison (bool output); throws for an arithmetic op.
template <class Fn>
decltype(auto) dispatch_comparison(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::Eq: return fn(BinaryFn<BinaryOp::Eq>{});
    case BinaryOp::Ne: return fn(BinaryFn<BinaryOp::Ne>{});
    case BinaryOp::Lt: return fn(BinaryFn<BinaryOp::Lt>{});
    case BinaryOp::Le: return fn(BinaryFn<BinaryOp::Le>{});
    case BinaryOp::Gt: return fn(BinaryFn<BinaryOp::Gt>{});
    case BinaryOp::Ge: return fn(BinaryFn<BinaryOp::Ge>{});
    default: throw Error("binary_kernel: a bool output needs a comparison op");
  }
}

/// Calls `fn(UnaryFn<op>{})` for the runtime `op`.
template <class Fn>
decltype(auto) dispatch_unary(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::Neg: return fn(UnaryFn<UnaryOp::Neg>{});
    case UnaryOp::Exp: return fn(UnaryFn<UnaryOp::Exp>{});
    case UnaryOp::Log: return fn(UnaryFn<UnaryOp::Log>{});
    case UnaryOp::Relu: return fn(UnaryFn<UnaryOp::Relu>{});
    case UnaryOp::Sigmoid: return fn(UnaryFn<UnaryOp::Sigmoid>{});
    case UnaryOp::Tanh: return fn(UnaryFn<UnaryOp::Tanh>{});
  }
  throw Error("unary_kernel: unknown op");
}

}  // namespace lockstep
