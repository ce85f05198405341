#include "data/idx.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/gzip_file.h"

namespace lockstep {

namespace {

// IDX sizes are big-endian 32-bit unsigned integers.
uint32_t read_big_endian(const uint8_t* bytes) {
  return (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) | uint32_t(bytes[3]);
}

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

// "60000 images of 28x28" or "60000 labels": what a header announces, for error messages.
std::string describe(const Shape& shape, const char* what) {
  std::string text = std::to_string(shape[0]) + " " + what;
  if (shape.size() == 3) text += " of " + std::to_string(shape[1]) + "x" + std::to_string(shape[2]);
  return text;
}

// Reads an IDX file of unsigned bytes with `rank` dimensions; `what` ("images" or "labels")
// names its contents in error messages.
Tensor read_idx(const std::string& path, uint32_t rank, const char* what) {
  // Read the whole (decompressed) file first, so that the header's sizes can be checked
  // against what the file really holds before anything is allocated for them.
  const std::vector<uint8_t> bytes = GzipFile(path).read_all();
  const int64_t file_bytes = static_cast<int64_t>(bytes.size());

  // Magic: two zero bytes, the element type (0x08 = unsigned byte), then the rank.
  const uint32_t expected_magic = 0x00000800u | rank;
  LOCKSTEP_CHECK(file_bytes >= 4, path, ": truncated: the file holds ", file_bytes,
                 " bytes, too few for an IDX magic number (4 bytes)");
  const uint32_t magic = read_big_endian(bytes.data());
  LOCKSTEP_CHECK((magic & 0xffffff00u) == 0x00000800u, path, ": bad magic number ", hex(magic), " (expected ",
                 hex(expected_magic), " for ", what, "); this is not an IDX file of unsigned bytes");
  LOCKSTEP_CHECK(magic == expected_magic, path, ": bad magic number ", hex(magic), " (expected ", hex(expected_magic),
                 " for ", what, "): the file has ", magic & 0xffu, " dimensions but ", what, " have ", rank);

  // One big-endian size per dimension follows the magic.
  const int64_t header_bytes = 4 + 4 * int64_t(rank);
  LOCKSTEP_CHECK(file_bytes >= header_bytes, path, ": truncated: the header needs ", header_bytes,
                 " bytes but the file holds ", file_bytes);
  Shape shape;
  for (uint32_t d = 0; d < rank; ++d) shape.push_back(read_big_endian(bytes.data() + 4 + 4 * d));

  // The elements: exactly N*H*W (or N) bytes, no fewer (truncated) and no more (wrong file).
  // Multiply the sizes step by step against what the file holds, so that a corrupt header's
  // huge sizes cannot overflow the product into a small number that looks fine.
  const int64_t held = file_bytes - header_bytes;
  const char* kind = rank == 3 ? "pixel data" : "label data";
  int64_t data_bytes = 1;
  for (int64_t size : shape) {
    LOCKSTEP_CHECK(size == 0 || data_bytes <= held / size, path, ": truncated: header says ", describe(shape, what),
                   " but the file holds ", held, " bytes of ", kind);
    data_bytes *= size;
  }
  LOCKSTEP_CHECK(held == data_bytes, path, ": header says ", describe(shape, what), " (", data_bytes, " bytes of ",
                 kind, ") but the file holds ", held, "; it is corrupt or not an IDX file of ", what);

  Tensor out = empty(shape, TensorOptions().dtype(DType::u8));  // out: (N, H, W) or (N)
  std::memcpy(out.data(), bytes.data() + header_bytes, static_cast<size_t>(data_bytes));
  return out;
}

}  // namespace

Tensor read_idx_images(const std::string& path) { return read_idx(path, 3, "images"); }

Tensor read_idx_labels(const std::string& path) { return read_idx(path, 1, "labels"); }

}  // namespace lockstep
