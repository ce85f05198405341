/// \file
/// AgreedError: an error that every rank of a job raises at the same point, from the same
/// exchanged facts — the ranks compared their settings and found them different or invalid. No
/// rank is left waiting for another, so every rank can leave the job the clean way (finish MPI,
/// exit 1) instead of ending the others with MPI_Abort, which is what a rank that fails alone
/// must do (abort_job).
#pragma once

#include <string>

#include "core/error.h"

namespace lockstep {

/// A lockstep::Error that every rank of the job throws together (see the file comment). Throw
/// it only from a check whose verdict every rank computes from the same gathered data.
class AgreedError : public Error {
 public:
  /// Wraps a complete message, of kind ErrorKind::Other.
  explicit AgreedError(const std::string& message) : Error(message) {}
  /// Wraps a complete message of the given kind.
  AgreedError(ErrorKind kind, const std::string& message) : Error(kind, message) {}
};

}  // namespace lockstep

/// Throws an AgreedError with the streamed message parts unless `cond` holds. For a check that
/// every rank makes on values the ranks have already agreed on (flags compared by the chapters'
/// check_ranks_agree, the data's sizes), so that all of them stop at it together. Example:
/// `LOCKSTEP_CHECK_AGREED(k <= steps, "--accumulate ", k, ": an epoch has only ", steps, " batches");`
#define LOCKSTEP_CHECK_AGREED(cond, ...)                                                     \
  do {                                                                                       \
    if (!(cond)) throw ::lockstep::AgreedError(::lockstep::detail::concat(__VA_ARGS__));     \
  } while (0)
