/// \file
/// Which backend a job's process group uses, MPI or NCCL, from where the model lives and how
/// many GPUs the ranks of each machine have.
#pragma once

#include <cstdlib>
#include <string>

#include "core/device.h"
#include "distributed/detect_launch.h"

namespace lockstep {

/// Which backend a job should use: `requested` is "auto", "mpi" or "nccl"; `device` is where the
/// model lives; `cuda_devices` is how many GPUs this rank sees. "auto" picks NCCL when the model
/// is on a GPU, NCCL is built in and every rank of this machine has a GPU of its own, and MPI
/// otherwise. Asking for "nccl" where it cannot work is an error that says why and what to do
/// instead, of kind ErrorKind::NcclNeedsCuda, ErrorKind::NcclNeedsOneGpuPerRank or
/// ErrorKind::NcclNotBuilt.
///
/// `visible_devices_set` says whether CUDA_VISIBLE_DEVICES is set. Without it every rank sees
/// all the machine's GPUs, and fewer GPUs than ranks means that ranks would share one. With it,
/// a launcher may have given each rank a GPU of its own to see (Slurm's `--gpus-per-task=1`:
/// one GPU each, all of them cuda:0), and the count alone cannot tell: "auto" then stays with
/// MPI, and an explicit "nccl" is let through for NCCL itself to check when it starts (it
/// refuses two ranks on one GPU).
std::string choose_backend(const std::string& requested, Device device, const LaunchInfo& launch, int cuda_devices,
                           bool visible_devices_set = std::getenv("CUDA_VISIBLE_DEVICES") != nullptr);

}  // namespace lockstep
