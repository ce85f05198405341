/// \file
/// What ReLU keeps for its backward pass. The gradient of relu(x) is the incoming gradient
/// where x > 0 and zero elsewhere, so the backward pass needs one bit per element: whether the
/// forward pass let that element through. PyTorch keeps the whole output instead. The bits
/// are 1/32 of an f32 output's bytes, and the output itself can be freed as soon as the next
/// layer is done with it.
///
/// The mask's layout, the same on both devices: bit i % 8 of byte i / 8 stands for element i
/// of the (contiguous) output, set where the gradient passes: where the input is > 0 or NaN
/// (a NaN output passes its gradient, as in PyTorch). The bytes come in whole 32-bit words,
/// the unit a warp of the CUDA kernel writes; the bits past the last element are 0.
#pragma once

#include <cstdint>

namespace lockstep {

/// The mask's size in bytes for `n` elements: ceil(n / 32) words of 4 bytes.
constexpr int64_t relu_mask_bytes(int64_t n) { return (n + 31) / 32 * 4; }

}  // namespace lockstep
