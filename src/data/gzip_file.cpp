#include "data/gzip_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "core/error.h"
#include "util/regular_file.h"

namespace lockstep {

namespace {
// A larger buffer than zlib's 8 KiB default: dataset files are tens of megabytes.
constexpr unsigned kBufferBytes = 1u << 20;
}  // namespace

GzipFile::GzipFile(const std::string& path, const std::string& reader) : path_(path) {
  LOCKSTEP_CHECK(!path.empty(), "(empty path): cannot open: no file name was given");
  const int fd = open_regular_file(reader, path, O_RDONLY);
  LOCKSTEP_CHECK(fd >= 0, path, ": cannot open (", std::strerror(errno), ")");
  // gzdopen takes the descriptor over (gzclose closes it); it fails only for lack of memory.
  file_ = gzdopen(fd, "rb");
  if (file_ == nullptr) ::close(fd);
  LOCKSTEP_CHECK(file_ != nullptr, path, ": cannot open (out of memory)");
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
      // zlib's message starts with its name for the file, the descriptor it was given
      // ("<fd:4>: incorrect data check"); drop it, the path says more.
      std::string reason = message;
      const size_t name_end = reason.find(">: ");
      if (reason.rfind("<fd:", 0) == 0 && name_end != std::string::npos) reason.erase(0, name_end + 3);
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
