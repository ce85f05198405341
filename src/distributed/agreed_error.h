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
