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

// The most elements an IDX file may declare: 2^31 bytes. The largest IDX datasets in use
// (EMNIST's 698k images of 28x28, 547 MB) fit four times over; a header beyond it is far more
// likely corrupt than real, and refusing it keeps a bad header from costing gigabytes.
constexpr int64_t kMaxElements = int64_t(1) << 31;

// Reads an IDX file of unsigned bytes with `rank` dimensions; `what` ("images" or "labels")
// names its contents in error messages.
//
// The header is read first and fixes the one size the file may have; the data is then read
// up to that size plus one byte. So memory and time are bounded by what the header declares
// (itself capped above), however much a compressed file would inflate to, and the one extra
// byte tells a file that holds more than its header says from one that holds exactly that.
Tensor read_idx(const std::string& path, uint32_t rank, const char* what) {
  GzipFile file(path, rank == 3 ? "read_idx_images" : "read_idx_labels");

  // Magic: two zero bytes, the element type (0x08 = unsigned byte), then the rank.
  const uint32_t expected_magic = 0x00000800u | rank;
  uint8_t header[4 + 4 * 3];
  const int64_t magic_bytes = file.read(header, 4);
  LOCKSTEP_CHECK(magic_bytes == 4, path, ": truncated: the file holds ", magic_bytes,
                 " bytes, too few for an IDX magic number (4 bytes)");
  const uint32_t magic = read_big_endian(header);
  LOCKSTEP_CHECK((magic & 0xffffff00u) == 0x00000800u, path, ": bad magic number ", hex(magic), " (expected ",
                 hex(expected_magic), " for ", what, "); this is not an IDX file of unsigned bytes");
  LOCKSTEP_CHECK(magic == expected_magic, path, ": bad magic number ", hex(magic), " (expected ", hex(expected_magic),
                 " for ", what, "): the file has ", magic & 0xffu, " dimensions but ", what, " have ", rank);

  // One big-endian size per dimension follows the magic.
  const int64_t header_bytes = 4 + 4 * int64_t(rank);
  const int64_t held_header = 4 + file.read(header + 4, header_bytes - 4);
  LOCKSTEP_CHECK(held_header == header_bytes, path, ": truncated: the header needs ", header_bytes,
                 " bytes but the file holds ", held_header);
  Shape shape;
  for (uint32_t d = 0; d < rank; ++d) shape.push_back(read_big_endian(header + 4 + 4 * d));

  // The elements: exactly N*H*W (or N) bytes. Multiply the sizes step by step against the cap,
  // so that a corrupt header's huge sizes cannot overflow the product into a small number that
  // looks fine.
  const char* kind = rank == 3 ? "pixel data" : "label data";
  int64_t data_bytes = 1;
  for (int64_t size : shape) {
    LOCKSTEP_CHECK(size == 0 || data_bytes <= kMaxElements / size, path, ": header says ", describe(shape, what),
                   ", more than the ", kMaxElements, " bytes of ", kind,
                   " an IDX file may hold; it is corrupt or not an IDX file of ", what);
    data_bytes *= size;
  }

  // No fewer bytes (truncated) and no more (a wrong file, or a compressed one that inflates
  // far beyond its header: reading stops one byte past the declared size).
  const std::vector<uint8_t> data = file.read_up_to(data_bytes + 1);
  const int64_t held = static_cast<int64_t>(data.size());
  LOCKSTEP_CHECK(held >= data_bytes, path, ": truncated: header says ", describe(shape, what),
                 " but the file holds ", held, " bytes of ", kind);
  LOCKSTEP_CHECK(held == data_bytes, path, ": header says ", describe(shape, what), " (", data_bytes, " bytes of ",
                 kind, ") but the file holds more (reading stopped at ", held,
                 " bytes); it is corrupt or not an IDX file of ", what);

  Tensor out = empty(shape, TensorOptions().dtype(DType::u8));  // out: (N, H, W) or (N)
  if (data_bytes > 0) std::memcpy(out.data(), data.data(), static_cast<size_t>(data_bytes));
  return out;
}

}  // namespace

Tensor read_idx_images(const std::string& path) { return read_idx(path, 3, "images"); }

Tensor read_idx_labels(const std::string& path) { return read_idx(path, 1, "labels"); }

}  // namespace lockstep
