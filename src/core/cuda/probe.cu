// CUDA build: ask the driver how many devices there are, once.
// On a machine without a GPU (or without a driver) cudaGetDeviceCount fails with errors such as
// "CUDA driver version is insufficient" or "no CUDA-capable device is detected"; every such
// failure means "no usable GPU here", not a crash.
#include <cuda_runtime.h>

#include "core/device.h"

namespace lockstep {

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error so later CUDA calls start clean
      return 0;
    }
    return n;
  }();
  return count;
}

bool built_with_cuda() { return true; }

}  // namespace lockstep
