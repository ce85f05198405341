#include "data/gzip_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "core/error.h"

namespace lockstep {

namespace {
// A larger buffer than zlib's 8 KiB default: dataset files are tens of megabytes.
constexpr unsigned kBufferBytes = 1u << 20;
}  // namespace

GzipFile::GzipFile(const std::string& path) : path_(path) {
  LOCKSTEP_CHECK(!path.empty(), "(empty path): cannot open: no file name was given");
  errno = 0;
  file_ = gzopen(path.c_str(), "rb");
  // gzopen fails through open(), which sets errno ("No such file or directory"), or for lack
  // of memory, which leaves it 0.
  LOCKSTEP_CHECK(file_ != nullptr, path, ": cannot open (", errno != 0 ? std::strerror(errno) : "out of memory", ")");
  gzbuffer(static_cast<gzFile>(file_), kBufferBytes);
}

GzipFile::~GzipFile() { gzclose(static_cast<gzFile>(file_)); }

int64_t GzipFile::read(void* destination, int64_t nbytes) {
  gzFile file = static_cast<gzFile>(file_);
  auto* out = static_cast<char*>(destination);
  int64_t total = 0;
  // gzread takes an unsigned int count, so large reads go in chunks.
  while (total < nbytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(nbytes - total, INT_MAX / 2));
    const int got = gzread(file, out + total, chunk);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      // Z_ERRNO is a failure of the operating system's read; the rest are corrupt gzip data.
      LOCKSTEP_CHECK(code != Z_ERRNO, path_, ": cannot read (", std::strerror(errno), ")");
      // zlib's message starts with the path again ("<path>: incorrect data check"); drop it.
      std::string reason = message;
      if (reason.rfind(path_ + ": ", 0) == 0) reason.erase(0, path_.size() + 2);
      LOCKSTEP_FAIL(path_, ": corrupt gzip data (", reason, ")");
    }
    if (got == 0) {
      // The end of the file. zlib reports a gzip stream cut short only here, through gzerror.
      int code = Z_OK;
      gzerror(file, &code);
      LOCKSTEP_CHECK(code != Z_BUF_ERROR, path_, ": truncated: the gzip stream ends early (unexpected end of file)");
      break;
    }
    total += got;
  }
  return total;
}

std::vector<uint8_t> GzipFile::read_up_to(int64_t limit) {
  std::vector<uint8_t> bytes;
  // Grow in steps of the buffer size, so that a file shorter than `limit` never costs `limit`.
  while (static_cast<int64_t>(bytes.size()) < limit) {
    const size_t used = bytes.size();
    const int64_t step = std::min<int64_t>(kBufferBytes, limit - static_cast<int64_t>(used));
    bytes.resize(used + static_cast<size_t>(step));
    const int64_t got = read(bytes.data() + used, step);
    bytes.resize(used + static_cast<size_t>(got));
    if (got < step) break;  // the end of the file
  }
  return bytes;
}

}  // namespace lockstep
