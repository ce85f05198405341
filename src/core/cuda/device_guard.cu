// Switching the calling thread's current CUDA device for DeviceGuard (device_guard.h).
#include "core/cuda/device_guard.h"

#include <cuda_runtime.h>

#include "core/cuda/check.cuh"

namespace lockstep::cuda::detail {

int switch_device(int index) {
  int previous = 0;
  LOCKSTEP_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous == index) return -1;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(index));
  return previous;
}

// A failure is cleared rather than left for the next launch check to report.
void restore_device(int index) noexcept {
  if (cudaSetDevice(index) != cudaSuccess) cudaGetLastError();
}

}  // namespace lockstep::cuda::detail
