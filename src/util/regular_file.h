/// \file
/// Opening a path a user gave, for reading or writing, only when it names a regular file.
///
/// A path on the command line can name anything: a FIFO (named pipe), whose open() waits for a
/// writer (or reader) that never comes; a device such as /dev/null, which a save would replace
/// by renaming a file over it; a socket or a folder. Every reader and writer of such a path goes
/// through this file, which looks at what the path is before opening it, opens it without
/// blocking (O_NONBLOCK, so that a path swapped for a FIFO in between cannot hang the program),
/// checks again what was opened (fstat), and refuses anything but a regular file with a
/// sentence that names the caller's context and what the path is, e.g.
/// `load_safetensors: 'model.safetensors' is a FIFO (named pipe); name a regular file`.
/// Symbolic links are followed, as open() follows them.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>

namespace lockstep {

/// What `path` names, following symbolic links, when it exists and is not a regular file, in the
/// words of a sentence: "a folder", "a FIFO (named pipe)", "a character device", "a block
/// device", "a socket" (or "not a regular file" for anything else). Empty when `path` is a
/// regular file or names nothing (yet).
std::string non_regular_kind(const std::string& path);

/// Throws lockstep::Error "<context>: '<path>' is a FIFO (named pipe); name a regular file"
/// (for a folder: "... is a folder; name a file") when `path` exists and is not a regular file
/// (non_regular_kind). A path that names nothing passes: a writer may create it.
void check_regular_if_exists(const std::string& context, const std::string& path);

/// Opens `path` like open(2) with `flags` (O_RDONLY, O_WRONLY | O_CREAT | O_TRUNC, ...) and
/// `mode`, but only a regular file: first check_regular_if_exists, so that no device or FIFO is
/// ever opened; then the open itself, non-blocking and close-on-exec; then fstat of what was
/// opened, refused the same way unless it is a regular file. O_NONBLOCK is cleared again before
/// the descriptor is returned, and O_TRUNC is applied only after the checks, so that nothing is
/// truncated that is not a regular file. Returns the descriptor, or -1 with errno set when the
/// system refuses the open (no such file, no permission, ...), which the caller words in its
/// own sentence.
int open_regular_file(const std::string& context, const std::string& path, int flags, mode_t mode = 0666);

/// Closes a FILE* that fopen_regular_file opened, when its owner goes.
struct FileCloser {
  /// Closes `file`.
  void operator()(std::FILE* file) const { std::fclose(file); }
};

/// A FILE* owned by whoever holds it, closed when it goes.
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

/// open_regular_file as a C stream: `mode` is fopen's "r", "w" or "a" (a "b" is allowed and
/// changes nothing on POSIX; "+" opens for reading and writing). Returns null with errno set
/// when the system refuses the open; throws as open_regular_file does for a path that is not a
/// regular file.
UniqueFile fopen_regular_file(const std::string& context, const std::string& path, const char* mode);

/// The file a path finally names when its symbolic links are followed, as open() and rename()
/// reach it: each link's target in turn, a relative one taken relative to the link's folder,
/// until a path that is not a link or names nothing (the target of a dangling link, which a
/// writer then creates). A path that is not a link is returned as it is. Throws lockstep::Error
/// naming `context` for a loop of links (more than 40 in a row, the limit Linux applies) or a
/// link that cannot be read.
std::string final_link_target(const std::string& context, const std::string& path);

}  // namespace lockstep
