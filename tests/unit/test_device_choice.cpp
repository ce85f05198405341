// The chapters' --device flag (chapters/common/device_choice.h): auto takes a GPU per process
// only where the machine has one for every process on it; explicit devices are taken as named.
// The GPU count is a parameter, so these rules are checked on a machine without GPUs.
#include <gtest/gtest.h>

#include "common/device_choice.h"
#include "test_util.h"

namespace lockstep {
namespace {

TEST(ResolveDevice, AutoTakesTheGpuOfItsLocalRankWhenEveryRankHasOne) {
  const DeviceChoice choice = resolve_device("auto", 1, 2, /*cuda_devices=*/2, /*cuda_built=*/true);
  EXPECT_EQ(choice.device, Device::cuda(1));
  EXPECT_EQ(choice.start_line(), "device: cuda:1 (auto: 2 GPUs, one per rank)");
  EXPECT_EQ(resolve_device("auto", 0, 2, 4, true).device, Device::cuda(0));
  EXPECT_EQ(resolve_device("auto", 0, 1, 1, true).start_line(), "device: cuda:0 (auto: 1 GPU)");
}

TEST(ResolveDevice, AutoFallsBackToTheCpu) {
  EXPECT_EQ(resolve_device("auto", 0, 1, 0, true).start_line(), "device: cpu (auto: no CUDA device)");
  EXPECT_EQ(resolve_device("auto", 0, 1, 0, false).start_line(), "device: cpu (auto: built without CUDA)");
  // Fewer GPUs than ranks on the machine: every rank stays on the CPU, none shares a GPU.
  for (int rank = 0; rank < 3; ++rank) {
    const DeviceChoice choice = resolve_device("auto", rank, 3, 2, true);
    EXPECT_EQ(choice.device, Device::cpu());
    EXPECT_EQ(choice.reason, "auto: 2 GPUs for 3 ranks on this machine, fewer than one per rank");
  }
}

TEST(ResolveDevice, ExplicitDevicesAreTakenAsNamed) {
  EXPECT_EQ(resolve_device("cpu", 0, 1, 2, true).start_line(), "device: cpu (--device cpu)");
  EXPECT_EQ(resolve_device("cuda:3", 0, 1, 2, true).device, Device::cuda(3));
  // cuda: the GPU of the local rank, wrapped around the machine's GPUs.
  EXPECT_EQ(resolve_device("cuda", 0, 1, 2, true).device, Device::cuda(0));
  EXPECT_EQ(resolve_device("cuda", 2, 3, 2, true).device, Device::cuda(0));
  EXPECT_EQ(resolve_device("cuda", 1, 3, 2, true).start_line(), "device: cuda:1 (--device cuda)");
  // Without a GPU an explicit cuda is still cuda: its first use says why it cannot be used.
  EXPECT_EQ(resolve_device("cuda", 0, 1, 0, false).device, Device::cuda(0));
}

TEST(ResolveDevice, RefusesWhatIsNoDevice) {
  test::expect_error([] { resolve_device("tpu", 0, 1, 0, true); }, "unknown device 'tpu': expected auto, cpu, cuda or cuda:N");
  test::expect_error([] { resolve_device("auto", 2, 2, 2, true); }, "local rank 2 is outside 0..1");
}

}  // namespace
}  // namespace lockstep
