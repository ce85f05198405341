// The calling thread's current device (set_device, current_device).
#include <gtest/gtest.h>

#include "../unit/test_util.h"
#include "gpu_test_util.h"

namespace lockstep::test {
namespace {

TEST(CudaContext, SetDeviceMakesAGpuTheThreadsCurrentDevice) {
  cuda::set_device(gpu());
  EXPECT_EQ(cuda::current_device(), gpu());
  // A GPU this machine lacks is refused, and the current device stays.
  expect_error([] { cuda::set_device(Device::cuda(cuda_device_count())); }, "this machine has");
  EXPECT_EQ(cuda::current_device(), gpu());
}

}  // namespace
}  // namespace lockstep::test
