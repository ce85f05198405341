/// \file
/// 2-D max pooling (torch.nn.functional.max_pool2d): each output element is the largest input
/// element in its kernel_size x kernel_size window. The forward pass remembers where each
/// maximum came from, so the backward pass can send the gradient straight back there.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace lockstep {

/// Max pooling over the last two dimensions of `input` (N, C, H, W), giving
/// (N, C, OH, OW) with OH = floor((H + 2 padding - kernel_size) / stride) + 1 (OW alike).
/// `stride` 0 means stride = kernel_size, PyTorch's default. Padding counts as -infinity, so
/// it never wins; as in PyTorch it may be at most kernel_size / 2. When a window holds the
/// same maximum twice, the first one in row-major order wins (and receives the gradient); a
/// NaN always wins, so it propagates. Overlapping windows (stride < kernel_size) add their
/// gradients where they share a maximum.
Tensor max_pool2d(const Tensor& input, int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);

}  // namespace lockstep
