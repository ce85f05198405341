/// \file
/// LOCKSTEP_MPI_CHECK: every MPI call in Lockstep goes through it, so that a failure becomes a
/// lockstep::Error naming the call, MPI's own explanation and where it was made, e.g.
/// "src/distributed/process_group_mpi.cpp:120: MPI error (MPI_ERR_TRUNCATE: message truncated)
/// in MPI_Bcast(...)". Communicators are set to MPI_ERRORS_RETURN, so MPI reports instead of
/// aborting on its own.
#pragma once

#include <mpi.h>

#include "core/error.h"

namespace lockstep::mpi::detail {

/// Throws lockstep::Error for an MPI return code other than MPI_SUCCESS.
inline void check_mpi(int status, const char* call, const char* file, int line) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  LOCKSTEP_FAIL(file, ":", line, ": MPI error (", std::string(text, length), ") in ", call);
}

}  // namespace lockstep::mpi::detail

/// Checks the return code of an MPI call.
#define LOCKSTEP_MPI_CHECK(call) ::lockstep::mpi::detail::check_mpi((call), #call, __FILE__, __LINE__)
