/// \file
/// The IDX format of MNIST and Fashion-MNIST: a big-endian header, then raw unsigned bytes.
///
///     bytes 0-3   magic: 0x00 0x00, the element type (0x08 = unsigned byte), the rank
///                 (0x00000801 for a label file, 0x00000803 for an image file)
///     then        one big-endian uint32 per dimension (N for labels; N, rows, cols for images)
///     then        the elements, row-major, one byte each
///
/// Files may be gzip-compressed (`.gz`); both forms are read the same way.
///
/// The header is trusted only as far as it can be checked: a file must hold exactly the bytes
/// its header declares, a header may declare at most 2^31 elements, and reading stops one byte
/// past the declared size, so a compressed file that would inflate to gigabytes costs no more
/// memory or time than its header allows.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace lockstep {

/// Reads an IDX image file (magic 0x00000803): a u8 tensor (N, H, W). Errors name the file and
/// the problem, e.g. `train-images-idx3-ubyte.gz: truncated: header says 60000 images of 28x28
/// but the file holds 1234 bytes of pixel data`, or for too much data `... header says 10
/// images of 28x28 (7840 bytes of pixel data) but the file holds more (reading stopped at 7841
/// bytes); ...`. A path that is not a regular file is refused without waiting on it (a FIFO):
/// `read_idx_images: 'in' is a FIFO (named pipe); name a regular file`. An IDX file may hold 0
/// images; datasets refuse that themselves.
Tensor read_idx_images(const std::string& path);

/// Reads an IDX label file (magic 0x00000801): a u8 tensor (N).
Tensor read_idx_labels(const std::string& path);

}  // namespace lockstep
