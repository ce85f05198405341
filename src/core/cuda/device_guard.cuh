// The device and stream every CUDA call of Lockstep's runs with: DeviceGuard (device_guard.h)
// makes a device current for a scope, and stream_for names the stream work on a device is
// queued on.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/context.h"
#include "core/cuda/device_guard.h"

namespace lockstep::cuda {

// The stream work on `device` is queued on.
inline cudaStream_t stream_for(Device device) { return static_cast<cudaStream_t>(current_stream(device)); }

}  // namespace lockstep::cuda
