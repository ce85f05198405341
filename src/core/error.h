/// \file
/// Errors a student can act on: every check in Lockstep throws lockstep::Error with a sentence
/// that names the operation, what it expected and what it got, and what a caller can do.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lockstep {

/// Which failure an Error reports, for a caller that answers some of them in its own way (a
/// program adds advice about its own flags). The message alone always says what went wrong; the
/// kind only sorts it, as PyTorch's torch.cuda.OutOfMemoryError sorts a RuntimeError.
enum class ErrorKind {
  Other,                   ///< misuse or bad input of any other kind (wrong shapes, devices, files)
  NoCudaDevice,            ///< a CUDA device was asked for that this build or this machine does not have
  OutOfMemory,             ///< a GPU's memory is full, even after the caching allocator gave back its cache
  NcclNeedsCuda,           ///< the NCCL backend was asked for a model or device that is not a GPU
  NcclNeedsOneGpuPerRank,  ///< the NCCL backend was asked for where ranks of one machine would share a GPU
  NcclNotBuilt,            ///< the NCCL backend was asked for in a build that has none
  DataNotFound,            ///< a dataset's files are neither in the directory named nor in a default place
  CollectiveTimeout,       ///< the ranks of a process group were given different collective timeouts
};

/// The one exception type Lockstep throws for misuse (wrong shapes, devices, dtypes, files).
class Error : public std::runtime_error {
 public:
  /// Wraps a complete, human-readable message, of kind ErrorKind::Other.
  explicit Error(const std::string& message) : Error(ErrorKind::Other, message) {}
  /// Wraps a complete, human-readable message of the given kind.
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  /// Which failure this is.
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
/// Streams every argument into one string, so checks can be written as a sentence in parts.
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace lockstep

/// Throws lockstep::Error of `kind` (an ErrorKind) with the streamed message parts: the failure
/// of a check whose condition is already known to be false (a switch's default, a loop that
/// found nothing). Example: `LOCKSTEP_FAIL_KIND(ErrorKind::DataNotFound, "no file ", path);`
#define LOCKSTEP_FAIL_KIND(kind, ...) throw ::lockstep::Error((kind), ::lockstep::detail::concat(__VA_ARGS__))

/// LOCKSTEP_FAIL_KIND with ErrorKind::Other, the kind of most errors. Example:
/// `LOCKSTEP_FAIL("dropout: expected a floating-point input, got ", dtype_name(dtype));`
#define LOCKSTEP_FAIL(...) LOCKSTEP_FAIL_KIND(::lockstep::ErrorKind::Other, __VA_ARGS__)

/// Throws lockstep::Error of `kind` (an ErrorKind) with the streamed message parts unless `cond`
/// holds. Example:
/// `LOCKSTEP_CHECK_KIND(n > 0, ErrorKind::NoCudaDevice, "cannot use ", device, ...);`
#define LOCKSTEP_CHECK_KIND(cond, kind, ...)        \
  do {                                              \
    if (!(cond)) LOCKSTEP_FAIL_KIND(kind, __VA_ARGS__); \
  } while (0)

/// Throws lockstep::Error with the streamed message parts unless `cond` holds.
/// Example: `LOCKSTEP_CHECK(a.dim() == 2, "matmul: expected a 2-D tensor, got ", a.dim(), "-D");`
#define LOCKSTEP_CHECK(cond, ...) LOCKSTEP_CHECK_KIND(cond, ::lockstep::ErrorKind::Other, __VA_ARGS__)
