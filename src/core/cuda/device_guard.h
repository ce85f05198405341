/// \file
/// DeviceGuard: makes a CUDA device the calling thread's current one for a scope. Callable from
/// any C++ file (no CUDA types), so that the one place that chooses between an op's CPU and
/// CUDA kernel (tensor/ops/dispatch/device_kernels.h) also makes the tensors' device current.
#pragma once

#include "core/cuda/api.h"
#include "core/device.h"

namespace lockstep::cuda {

namespace detail {
/// Makes CUDA device `index` current and returns the index that was current before, or -1
/// when `index` was current already (then nothing was touched).
LOCKSTEP_CUDA_FN(int switch_device(int index))
/// Makes device `index` current again, without throwing: a failure is cleared, since the
/// device was current a moment ago.
LOCKSTEP_CUDA_FN(void restore_device(int index) noexcept)
}  // namespace detail

/// Makes `device` the calling thread's current CUDA device until the guard goes out of scope.
/// Kernels launch on the current device. When `device` is current already (the usual case
/// after set_device), the guard touches nothing.
class DeviceGuard {
 public:
  /// Makes `device` (a CUDA device) current.
  explicit DeviceGuard(Device device) : previous_(detail::switch_device(device.index())) {}
  /// Makes the previous device current again.
  ~DeviceGuard() {
    if (previous_ >= 0) detail::restore_device(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

}  // namespace lockstep::cuda
