/// \file
/// The chapters' `--device` flag: `auto` (the default) puts each process on a GPU of its own
/// where the machine has enough of them, and on the CPU otherwise; `cpu`, `cuda` and `cuda:N`
/// name the device. The program prints the choice as its first line, with the reason.
#pragma once

#include <string>

#include "core/device.h"

namespace lockstep {

/// The device a chapter program computes on, and the words its first line gives for it.
struct DeviceChoice {
  Device device;       ///< where this process puts its model and batches
  std::string reason;  ///< e.g. "auto: no CUDA device", "auto: 2 GPUs, one per rank" or "--device cuda:1"
  /// The program's first line: "device: <device> (<reason>)", e.g. "device: cpu (auto: no CUDA device)".
  std::string start_line() const;
};

/// Resolves the `--device` flag of the process with rank `local_rank` among the
/// `local_world_size` processes of the job on this machine (0 and 1 for a single process):
/// - "auto": cuda:local_rank when this build has CUDA and the machine has at least
///   `local_world_size` GPUs (one GPU per process on the machine), otherwise the CPU;
/// - "cuda": this process's GPU, cuda:(local_rank % cuda_devices) (cuda:0 for a single process);
/// - "cpu" or "cuda:N": that device (Device::parse).
/// An explicit GPU is not checked here: its first use says why it cannot be used, if it cannot.
/// Any other text is an error naming the accepted values. `cuda_devices` and `cuda_built` are
/// parameters so that tests can pretend to have GPUs.
DeviceChoice resolve_device(const std::string& flag, int local_rank, int local_world_size,
                            int cuda_devices = cuda_device_count(), bool cuda_built = built_with_cuda());

}  // namespace lockstep
