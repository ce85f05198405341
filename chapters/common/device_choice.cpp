#include "common/device_choice.h"

#include "core/error.h"

namespace lockstep {

std::string DeviceChoice::start_line() const { return "device: " + device.str() + " (" + reason + ")"; }

namespace {

// The words of an auto choice: how many GPUs there are against how many processes need one.
std::string auto_reason(int cuda_devices, int local_world_size, bool cuda_built) {
  if (!cuda_built) return "auto: built without CUDA";
  if (cuda_devices == 0) return "auto: no CUDA device";
  const std::string gpus = std::to_string(cuda_devices) + (cuda_devices == 1 ? " GPU" : " GPUs");
  if (local_world_size == 1) return "auto: " + gpus;
  if (cuda_devices < local_world_size) {
    return "auto: " + gpus + " for " + std::to_string(local_world_size) + " ranks on this machine, fewer than one per rank";
  }
  return "auto: " + gpus + ", one per rank";
}

}  // namespace

DeviceChoice resolve_device(const std::string& flag, int local_rank, int local_world_size, int cuda_devices,
                            bool cuda_built) {
  LOCKSTEP_CHECK(local_rank >= 0 && local_rank < local_world_size, "resolve_device: local rank ", local_rank,
                 " is outside 0..", local_world_size - 1);
  if (flag == "auto") {
    const int usable = cuda_built ? cuda_devices : 0;
    const Device device = usable > 0 && usable >= local_world_size ? Device::cuda(local_rank) : Device::cpu();
    return {device, auto_reason(usable, local_world_size, cuda_built)};
  }
  if (flag == "cuda") return {Device::cuda(cuda_devices > 0 ? local_rank % cuda_devices : local_rank), "--device cuda"};
  try {
    return {Device::parse(flag), "--device " + flag};
  } catch (const Error&) {
    throw Error("unknown device '" + flag + "': expected auto, cpu, cuda or cuda:N");
  }
}

}  // namespace lockstep
