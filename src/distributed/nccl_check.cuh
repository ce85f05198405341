// LOCKSTEP_NCCL_CHECK: every NCCL call in Lockstep goes through it, so that a failure becomes a
// lockstep::Error naming the call, NCCL's explanation and where it was made, e.g.
//   "src/distributed/process_group_nccl.cu:120: NCCL error (invalid usage ...: Duplicate GPU
//    detected ...) in ncclCommInitRank(...)"
// The result code alone says little ("invalid usage"); ncclGetLastError adds NCCL's own sentence.
#pragma once

#include <nccl.h>

#include "core/cuda/check.cuh"

namespace lockstep::nccl::detail {

// Throws lockstep::Error for a result other than ncclSuccess.
inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  // The communicator argument of ncclGetLastError is unused by NCCL, so none is needed here.
  const char* last = ncclGetLastError(nullptr);
  const bool has_detail = last != nullptr && last[0] != '\0';
  LOCKSTEP_FAIL(cuda::detail::source_path(file), ":", line, ": NCCL error (",
                ncclGetErrorString(status), has_detail ? ": " : "", has_detail ? last : "",
                ") in ", call);
}

}  // namespace lockstep::nccl::detail

// Checks the ncclResult_t returned by an NCCL call.
#define LOCKSTEP_NCCL_CHECK(call) ::lockstep::nccl::detail::check_nccl((call), #call, __FILE__, __LINE__)
