/// \file
/// Elementwise ops with NumPy/PyTorch broadcasting: arithmetic, activations, comparisons.
/// All are differentiable except the comparisons (which return bool tensors).
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// a + b (broadcasting).
Tensor add(const Tensor& a, const Tensor& b);
/// a - b (broadcasting).
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b, elementwise (broadcasting).
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b, elementwise (broadcasting).
Tensor div(const Tensor& a, const Tensor& b);
/// -a.
Tensor neg(const Tensor& a);
/// e^a.
Tensor exp(const Tensor& a);
/// Natural logarithm.
Tensor log(const Tensor& a);
/// max(a, 0); its gradient at 0 is 0, as in PyTorch.
Tensor relu(const Tensor& a);
/// max(a, 0) written over `a` (torch.relu_, and nn::ReLU(true)), recorded for autograd like
/// relu. While gradients are recorded, `a` must be the output of an op, contiguous, and share
/// its memory with no other tensor (no view of it, no copy saved for a backward pass), so that
/// nothing else can still need its old values; otherwise it throws and says to use relu.
/// Returns `a`.
const Tensor& relu_(const Tensor& a);
/// 1 / (1 + e^-a).
Tensor sigmoid(const Tensor& a);
/// Hyperbolic tangent.
Tensor tanh(const Tensor& a);

/// a == b as a bool tensor (broadcasting).
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b as a bool tensor.
Tensor ne(const Tensor& a, const Tensor& b);
/// a < b as a bool tensor.
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b as a bool tensor.
Tensor le(const Tensor& a, const Tensor& b);
/// a > b as a bool tensor.
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b as a bool tensor.
Tensor ge(const Tensor& a, const Tensor& b);

/// A 0-d tensor holding `value` with `like`'s dtype and device: how scalars join tensor ops.
Tensor scalar_like(double value, const Tensor& like);

// Operators (scalars become 0-d tensors of the tensor's dtype)
/// add().
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
/// sub().
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
/// mul().
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
/// div().
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
/// neg().
inline Tensor operator-(const Tensor& a) { return neg(a); }
/// a + s.
inline Tensor operator+(const Tensor& a, double s) { return add(a, scalar_like(s, a)); }
/// s + a.
inline Tensor operator+(double s, const Tensor& a) { return add(scalar_like(s, a), a); }
/// a - s.
inline Tensor operator-(const Tensor& a, double s) { return sub(a, scalar_like(s, a)); }
/// s - a.
inline Tensor operator-(double s, const Tensor& a) { return sub(scalar_like(s, a), a); }
/// a * s.
inline Tensor operator*(const Tensor& a, double s) { return mul(a, scalar_like(s, a)); }
/// s * a.
inline Tensor operator*(double s, const Tensor& a) { return mul(scalar_like(s, a), a); }
/// a / s.
inline Tensor operator/(const Tensor& a, double s) { return div(a, scalar_like(s, a)); }
/// s / a.
inline Tensor operator/(double s, const Tensor& a) { return div(scalar_like(s, a), a); }

}  // namespace lockstep
