// Fuzz target: the IDX reader (read_idx_images, read_idx_labels; src/data/idx.h), plain and
// gzip-compressed.
//
// Feeds: the first byte of the input chooses what to read; the rest is the file.
//   bit 0   0: read_idx_images (magic 0x00000803)   1: read_idx_labels (magic 0x00000801)
//   bit 1   0: the file is written as given (a gzip stream among the seeds exercises zlib's
//              decoding of damaged data)   1: the file is gzip-compressed first, so that the
//              fuzzer's changes to the IDX bytes also reach the reader through zlib
// Asserts: no crash, no undefined behaviour, no hang, and no exception but lockstep::Error;
// a file that reads has the rank, the dtype and the sizes its header declares, and its tensor
// holds exactly the bytes after the header.
#include <zlib.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "data/idx.h"
#include "fuzz_input.h"

namespace {

using lockstep::fuzz::require;

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  require(deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
          "zlib's deflateInit2 succeeds");
  std::vector<uint8_t> out(deflateBound(&stream, size) + 32);
  stream.next_in = const_cast<Bytef*>(data);
  stream.avail_in = static_cast<uInt>(size);
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  require(deflate(&stream, Z_FINISH) == Z_STREAM_END, "zlib's deflate compresses the input in one call");
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

uint32_t big_endian(const uint8_t* bytes) {
  return (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) | uint32_t(bytes[3]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool labels = (data[0] & 1) != 0;
  const bool compress = (data[0] & 2) != 0;
  const uint8_t* file = data + 1;
  const size_t file_size = size - 1;
  const std::vector<uint8_t> bytes = compress ? gzip(file, file_size) : std::vector<uint8_t>(file, file + file_size);
  const std::string path = lockstep::fuzz::write_file(labels ? "labels-idx1-ubyte" : "images-idx3-ubyte",
                                                      bytes.data(), bytes.size());
  lockstep::Tensor tensor;
  try {
    tensor = labels ? lockstep::read_idx_labels(path) : lockstep::read_idx_images(path);
  } catch (const lockstep::Error&) {
    return 0;  // the documented way to refuse a file
  }

  // It read: the header must be what the reader says it accepts, and the data all of the rest.
  const size_t rank = labels ? 1 : 3;
  require(tensor.dtype() == lockstep::DType::u8, "an IDX tensor is u8");
  require(static_cast<size_t>(tensor.dim()) == rank, "an IDX tensor has the rank of its kind");
  // zlib reads a file that starts with the gzip magic as gzip, any other as it is.
  const bool plain = compress || file_size < 2 || file[0] != 0x1f || file[1] != 0x8b;
  if (!plain) return 0;  // a gzip stream of the fuzzer's own: its decoded bytes are unknown here
  require(file_size >= 4 + 4 * rank, "a file that reads holds a whole header");
  require(big_endian(file) == (0x00000800u | rank), "a file that reads has the magic number of its kind");
  size_t numel = 1;
  for (size_t d = 0; d < rank; ++d) {
    require(tensor.size(static_cast<int64_t>(d)) == int64_t(big_endian(file + 4 + 4 * d)), "each size is the header's");
    numel *= big_endian(file + 4 + 4 * d);
  }
  const size_t header = 4 + 4 * rank;
  require(file_size - header == numel, "a file that reads holds exactly the bytes its header declares");
  require(numel == 0 || std::memcmp(tensor.data(), file + header, numel) == 0,
          "the tensor holds the bytes after the header, in order");
  return 0;
}
