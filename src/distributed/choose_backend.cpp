#include "distributed/choose_backend.h"

#include "core/error.h"
#include "distributed/process_group_nccl.h"

namespace lockstep {

std::string choose_backend(const std::string& requested, Device device, const LaunchInfo& launch, int cuda_devices,
                           bool visible_devices_set) {
  LOCKSTEP_CHECK(requested == "auto" || requested == "mpi" || requested == "nccl",
                 "choose_backend: expected \"auto\", \"mpi\" or \"nccl\", got \"", requested, "\"");
  // Certain only when every rank sees the whole machine; see the header.
  const bool own_gpu_each = cuda_devices >= launch.local_world_size;
  if (requested == "mpi") return "mpi";
  if (requested == "auto") return device.is_cuda() && built_with_nccl() && own_gpu_each ? "nccl" : "mpi";
  // NCCL was asked for: say exactly which of its conditions fails.
  LOCKSTEP_CHECK_KIND(device.is_cuda(), ErrorKind::NcclNeedsCuda, "the NCCL backend moves CUDA tensors only, and "
                      "the model is on ", device.str(), "; put the model on a GPU, or choose the MPI backend");
  LOCKSTEP_CHECK_KIND(own_gpu_each || visible_devices_set, ErrorKind::NcclNeedsOneGpuPerRank, launch.local_world_size,
                      " ranks on this node but only ", cuda_devices, " CUDA device(s); NCCL needs one GPU per rank: "
                      "choose the MPI backend, or start fewer ranks");
  LOCKSTEP_CHECK_KIND(built_with_nccl(), ErrorKind::NcclNotBuilt, "this build has no NCCL backend (it needs CUDA, "
                      "NCCL and MPI when CMake runs); choose the MPI backend");
  return "nccl";
}

}  // namespace lockstep
