// The calling thread's current device (set_device, current_device).
#include <gtest/gtest.h>

#include <thread>

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

// The current device belongs to one thread: a new thread starts on cuda:0, whatever others set;
// and work on another GPU leaves it as it was.
TEST(CudaContext, EachThreadHasItsOwnCurrentDevice) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const Device second = Device::cuda(1);
  cuda::set_device(second);
  Device seen_by_new_thread = second;
  std::thread([&] { seen_by_new_thread = cuda::current_device(); }).join();
  EXPECT_EQ(seen_by_new_thread, gpu());
  EXPECT_EQ(sum(ones({4}, TensorOptions().device(gpu()))).item(), 4.0);
  EXPECT_EQ(cuda::current_device(), second);
  cuda::set_device(gpu());
}

}  // namespace
}  // namespace lockstep::test
