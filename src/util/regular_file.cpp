#include "util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace lockstep {

namespace {

// Linux's own limit on links followed in one path (MAXSYMLINKS): beyond it, open() fails with
// ELOOP, so a save that followed more would reach a file no open() of the path reaches.
constexpr int kMaxLinksFollowed = 40;

// `mode`'s file type in a sentence's words; empty for a regular file.
std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Throws the refusal for `path`, which is `kind` (not empty).
[[noreturn]] void refuse(const std::string& context, const std::string& path, const std::string& kind) {
  LOCKSTEP_FAIL(context, ": '", path, "' is ", kind, kind == "a folder" ? "; name a file" : "; name a regular file");
}

// The descriptor's file status flags with O_NONBLOCK cleared, so that reads and writes of the
// regular file behave as after a plain open(); false if fcntl fails (errno set).
bool clear_non_blocking(int fd) {
  const int status = ::fcntl(fd, F_GETFL);
  return status != -1 && ::fcntl(fd, F_SETFL, status & ~O_NONBLOCK) != -1;
}

// Closes `fd` and returns -1, keeping the errno of the failure that led here.
int close_keeping_errno(int fd) {
  const int error = errno;
  ::close(fd);
  errno = error;
  return -1;
}

}  // namespace

std::string non_regular_kind(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return "";
  return kind_of(info.st_mode);
}

void check_regular_if_exists(const std::string& context, const std::string& path) {
  const std::string kind = non_regular_kind(path);
  if (!kind.empty()) refuse(context, path, kind);
}

int open_regular_file(const std::string& context, const std::string& path, int flags, mode_t mode) {
  check_regular_if_exists(context, path);
  const int fd = ::open(path.c_str(), (flags & ~O_TRUNC) | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) {
    // A FIFO that appeared after the check: opened for writing without a reader, open() fails
    // (ENXIO) rather than waiting; name what it is rather than the system's puzzling reason.
    const int error = errno;
    check_regular_if_exists(context, path);
    errno = error;
    return -1;
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) return close_keeping_errno(fd);
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    refuse(context, path, kind_of(info.st_mode));
  }
  if (!clear_non_blocking(fd)) return close_keeping_errno(fd);
  if ((flags & O_TRUNC) != 0 && ::ftruncate(fd, 0) != 0) return close_keeping_errno(fd);
  return fd;
}

UniqueFile fopen_regular_file(const std::string& context, const std::string& path, const char* mode) {
  const std::string text = mode;
  const bool known = !text.empty() && std::strchr("rwa", text[0]) != nullptr &&
                     text.find_first_not_of("b+", 1) == std::string::npos;
  LOCKSTEP_CHECK(known, "fopen_regular_file: mode '", text,
                 "' is not one of fopen's \"r\", \"w\" or \"a\" (with \"b\" or \"+\")");
  const bool both = text.find('+') != std::string::npos;
  int flags = both ? O_RDWR : text[0] == 'r' ? O_RDONLY : O_WRONLY;
  if (text[0] == 'w') flags |= O_CREAT | O_TRUNC;
  if (text[0] == 'a') flags |= O_CREAT | O_APPEND;
  const int fd = open_regular_file(context, path, flags);
  if (fd < 0) return nullptr;
  std::FILE* file = ::fdopen(fd, mode);
  if (file == nullptr) close_keeping_errno(fd);
  return UniqueFile(file);
}

std::string final_link_target(const std::string& context, const std::string& path) {
  std::string current = path;
  for (int followed = 0;; ++followed) {
    struct stat info;
    if (::lstat(current.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return current;
    LOCKSTEP_CHECK(followed < kMaxLinksFollowed, context, ": '", path, "' leads through more than ",
                   kMaxLinksFollowed, " symbolic links (a loop of links?); name the file itself");
    std::vector<char> target(static_cast<size_t>(info.st_size > 0 ? info.st_size : 4096) + 1);
    const ssize_t length = ::readlink(current.c_str(), target.data(), target.size());
    LOCKSTEP_CHECK(length >= 0 && static_cast<size_t>(length) < target.size(), context,
                   ": cannot read the symbolic link '", current, "' (",
                   length < 0 ? std::strerror(errno) : "it changed while being read", ")");
    // A relative target is relative to the link's folder; `/` keeps an absolute one as it is.
    const std::string next(target.data(), static_cast<size_t>(length));
    current = (std::filesystem::path(current).parent_path() / next).string();
  }
}

}  // namespace lockstep
