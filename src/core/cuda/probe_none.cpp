// CPU-only build: there is no CUDA backend, so there are no CUDA devices.
// (core/cuda/probe.cu replaces this file when CMake finds nvcc.)
#include "core/device.h"

namespace lockstep {

int cuda_device_count() { return 0; }

bool built_with_cuda() { return false; }

}  // namespace lockstep
