/// \file
/// Errors a student can act on: every check in Lockstep throws lockstep::Error with a sentence
/// that names the operation, what it expected and what it got.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lockstep {

/// The one exception type Lockstep throws for misuse (wrong shapes, devices, dtypes, files).
class Error : public std::runtime_error {
 public:
  /// Wraps a complete, human-readable message.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
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

/// Throws lockstep::Error with the streamed message parts unless `cond` holds.
/// Example: `LOCKSTEP_CHECK(a.dim() == 2, "matmul: expected a 2-D tensor, got ", a.dim(), "-D");`
#define LOCKSTEP_CHECK(cond, ...)                                       \
  do {                                                                  \
    if (!(cond)) throw ::lockstep::Error(::lockstep::detail::concat(__VA_ARGS__)); \
  } while (0)
