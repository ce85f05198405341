// Every CUDA runtime and cuBLAS call in Lockstep goes through one of these macros, so that a
// failure becomes a lockstep::Error naming the call and where it was made, e.g.
//   "src/tensor/ops/cuda/gemm.cu:88: cuBLAS error CUBLAS_STATUS_INVALID_VALUE in cublasSgemm(...)"
// instead of a silently wrong result. Kernel launches report nothing by themselves; call
// LOCKSTEP_CUDA_CHECK_LAUNCH() right after each one.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "core/error.h"

namespace lockstep::cuda::detail {

// "/home/me/lockstep/src/tensor/ops/cuda/gemm.cu" -> "src/tensor/ops/cuda/gemm.cu": the part a
// reader can find.
inline const char* source_path(const char* file) {
  const char* found = nullptr;
  for (const char* p = std::strstr(file, "src/"); p != nullptr; p = std::strstr(p + 1, "src/")) found = p;
  return found != nullptr ? found : file;
}

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  LOCKSTEP_FAIL(source_path(file), ":", line, ": CUDA error ", cudaGetErrorName(status), " (",
                cudaGetErrorString(status), ") in ", call);
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  LOCKSTEP_FAIL(source_path(file), ":", line, ": cuBLAS error ", cublasGetStatusName(status),
                " (", cublasGetStatusString(status), ") in ", call);
}

// Destructors must not throw: a failure while releasing is reported on stderr and otherwise
// ignored (the program may be unwinding from an earlier error already).
template <class Release>
void release_quietly(const char* what, Release release) noexcept {
  try {
    release();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: warning: %s failed: %s\n", what, e.what());
  }
}

}  // namespace lockstep::cuda::detail

namespace lockstep::cuda {

// Whether all the work recorded before `event` has finished; the CPU does not wait. A pending
// event answers cudaErrorNotReady, which is no failure, but the runtime records every error
// code a call returns as the thread's last error, this one too (PyTorch clears it for the same
// reason). Left there, the next LOCKSTEP_CUDA_CHECK_LAUNCH() would report it against an
// unrelated kernel, so it is cleared here.
inline bool event_completed(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  detail::check_cuda(status, "cudaEventQuery(event)", __FILE__, __LINE__);
  return true;
}

}  // namespace lockstep::cuda

// Checks a cudaError_t returned by a CUDA runtime call.
#define LOCKSTEP_CUDA_CHECK(call) ::lockstep::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
// Checks a cublasStatus_t returned by a cuBLAS call.
#define LOCKSTEP_CUBLAS_CHECK(call) ::lockstep::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
// Checks that the kernel launched just before was accepted (bad grid size, missing image for
// this GPU architecture, ...). Errors inside the kernel surface at the next synchronisation.
#define LOCKSTEP_CUDA_CHECK_LAUNCH() LOCKSTEP_CUDA_CHECK(cudaGetLastError())
