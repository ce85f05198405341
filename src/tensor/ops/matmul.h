/// \file
/// Matrix products: matmul (torch.matmul) and linear (torch.nn.functional.linear, the fully
/// connected layer y = x W^T + b). Both run on cpu::gemm, which reads its operands through
/// their strides, so transposed views are multiplied in place without a copy.
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

/// Matrix product with torch.matmul's rules:
/// - (M, K) x (K, N) -> (M, N);
/// - batched: (..., M, K) x (..., K, N) -> (..., M, N), the batch dimensions broadcasting
///   like elementwise ops, so (B, M, K) x (K, N) multiplies every matrix of the batch by the
///   same (K, N) one;
/// - a 1-D first argument is a row vector and a 1-D second argument a column vector, and
///   that dimension is removed from the result (1-D x 1-D is the dot product, a 0-d tensor).
///
/// Backward: dA = dC B^T and dB = A^T dC, each one matmul on transposed views, summed over
/// any batch dimensions that were broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

/// A fully connected layer: `x W^T + bias`, with x (..., in_features), weight
/// (out_features, in_features) as in PyTorch, and bias (out_features) or undefined for none.
/// Returns (..., out_features). The leading dimensions of x are folded into one batch of rows,
/// so forward and backward are one GEMM each: dx = dy W, dW = dy^T x, dbias = dy summed over
/// the batch.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace lockstep
