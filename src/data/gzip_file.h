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
/// file: `<path>: cannot open (No such file or directory)`. Only a regular file is opened
/// (util/regular_file.h): a FIFO, device or folder is refused without waiting on it.
///
/// A compressed file says nothing trustworthy about how large it becomes (a few megabytes of
/// zeros inflate to gigabytes), so nothing here reads "everything": each read names how many
/// bytes it wants at most, and readers derive that bound from what the file's header declares.
class GzipFile {
 public:
  /// Opens `path`; throws lockstep::Error if it cannot be opened, or if it is not a regular
  /// file: `read_idx_images: 'in' is a FIFO (named pipe); name a regular file`, where
  /// `reader` is the name of the function that reads it.
  GzipFile(const std::string& path, const std::string& reader);
  /// Closes the file.
  ~GzipFile();
  GzipFile(const GzipFile&) = delete;             ///< Owns an open file; not copyable.
  GzipFile& operator=(const GzipFile&) = delete;  ///< Owns an open file; not copyable.

  /// Reads up to `nbytes` (decompressed) bytes into `destination` and returns how many were
  /// read: fewer only at the end of the file. Throws on a read error or corrupt gzip data.
  int64_t read(void* destination, int64_t nbytes);
  /// Reads from the current position until the end of the file or until `limit` bytes, whichever
  /// comes first. Memory grows with what is actually read, never beyond `limit`, so a header
  /// that claims a huge size costs nothing until the data is there. A caller that expects exactly
  /// n bytes asks for n + 1: getting n + 1 back means the file holds more than it should.
  std::vector<uint8_t> read_up_to(int64_t limit);
  /// The path the file was opened with (for error messages).
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* file_;  // a zlib gzFile, kept opaque so that this header does not need zlib.h
};

}  // namespace lockstep
