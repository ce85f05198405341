// The device and stream every CUDA call of Lockstep's runs with: a guard that makes a device
// current for a scope, and the stream work on a device is queued on.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/check.cuh"
#include "core/cuda/context.h"

namespace lockstep::cuda {

// Makes `device` the calling thread's current CUDA device until the guard goes out of scope.
// Kernels launch on the current device, so every launcher starts with one. When `device` is
// current already (the usual case after set_device), the guard touches nothing.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) {
    LOCKSTEP_CUDA_CHECK(cudaGetDevice(&previous_));
    switched_ = previous_ != device.index();
    if (switched_) LOCKSTEP_CUDA_CHECK(cudaSetDevice(device.index()));
  }
  // A destructor must not throw; the previous device was current a moment ago, so a failure
  // here is unexpected, and is cleared rather than left for the next launch check to report.
  ~DeviceGuard() {
    if (switched_ && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// The stream work on `device` is queued on.
inline cudaStream_t stream_for(Device device) { return static_cast<cudaStream_t>(current_stream(device)); }

}  // namespace lockstep::cuda
