/// \file
/// Reading a file that may or may not be gzip-compressed: dataset files ship both ways
/// (`train-images-idx3-ubyte` or `train-images-idx3-ubyte.gz`), and readers should not care.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

/// A file opened for reading through zlib, which decompresses a gzip file (one starting with
/// the magic bytes 1f 8b) and passes any other file through unchanged. Every error names the
/// file: `<path>: cannot open (No such file or directory)`.
class GzipFile {
 public:
  /// Opens `path`; throws lockstep::Error if it cannot be opened.
  explicit GzipFile(const std::string& path);
  /// Closes the file.
  ~GzipFile();
  GzipFile(const GzipFile&) = delete;             ///< Owns an open file; not copyable.
  GzipFile& operator=(const GzipFile&) = delete;  ///< Owns an open file; not copyable.

  /// Reads up to `nbytes` (decompressed) bytes into `destination` and returns how many were
  /// read: fewer only at the end of the file. Throws on a read error or corrupt gzip data.
  int64_t read(void* destination, int64_t nbytes);
  /// Reads everything from the current position to the end of the file.
  std::vector<uint8_t> read_all();
  /// The path the file was opened with (for error messages).
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* file_;  // a zlib gzFile, kept opaque so that this header does not need zlib.h
};

}  // namespace lockstep
