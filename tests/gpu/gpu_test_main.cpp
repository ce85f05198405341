// The GPU tests' main: without a usable CUDA device there is nothing to test, so the binary
// says so and exits with 77, which CTest reports as "skipped" rather than passed or failed.
#include <gtest/gtest.h>

#include <cstdio>

#include "lockstep.h"

int main(int argc, char** argv) {
  if (lockstep::cuda_device_count() == 0) {
    std::printf("gpu_tests: skipped, %s\n", lockstep::built_with_cuda() ? "this machine has no usable CUDA device"
                                                                          : "Lockstep was built without CUDA");
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
