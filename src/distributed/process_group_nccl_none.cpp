// A build without NCCL (no CUDA compiler, no nccl.h, or no MPI to send NCCL's id): the NCCL
// backend exists but says why it cannot be used. (process_group_nccl.cu replaces this file when
// CMake finds CUDA, NCCL and MPI.)
#include "core/error.h"
#include "distributed/process_group_nccl.h"

namespace lockstep {

bool built_with_nccl() { return false; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<ProcessGroup>&, Device, const ProcessGroupOptions&) {
  throw Error(ErrorKind::NcclNotBuilt,
              "the NCCL backend is not part of this build (it needs CUDA, NCCL and MPI when CMake runs); use the MPI "
              "backend");
}

}  // namespace lockstep
