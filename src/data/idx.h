/// \file
/// The IDX format of MNIST and Fashion-MNIST: a big-endian header, then raw unsigned bytes.
///
///     bytes 0-3   magic: 0x00 0x00, the element type (0x08 = unsigned byte), the rank
///                 (0x00000801 for a label file, 0x00000803 for an image file)
///     then        one big-endian uint32 per dimension (N for labels; N, rows, cols for images)
///     then        the elements, row-major, one byte each
///
/// Files may be gzip-compressed (`.gz`); both forms are read the same way.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace lockstep {

/// Reads an IDX image file (magic 0x00000803): a u8 tensor (N, H, W). Errors name the file and
/// the problem, e.g. `train-images-idx3-ubyte.gz: truncated: header says 60000 images of 28x28
/// but the file holds 1234 bytes of pixel data`.
Tensor read_idx_images(const std::string& path);

/// Reads an IDX label file (magic 0x00000801): a u8 tensor (N).
Tensor read_idx_labels(const std::string& path);

}  // namespace lockstep
