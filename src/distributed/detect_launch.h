/// \file
/// Who launched this process (mpirun, srun, torchrun or nobody) and what the launcher told it:
/// its rank, the world size, and its place among the ranks of its own machine.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

namespace lockstep {

/// What the launcher told this process about the job.
struct LaunchInfo {
  std::string launcher = "none";  ///< "openmpi", "mpich", "slurm", "torchrun" or "none"
  int rank = 0;                   ///< this process's rank in the job, 0..world_size-1
  int world_size = 1;             ///< how many processes the job has
  int local_rank = 0;             ///< this process's rank among those on its machine
  int local_world_size = 1;       ///< how many of the job's processes run on this machine
};

/// Reads the launcher's environment variables: Open MPI's OMPI_COMM_WORLD_*, MPICH/Hydra's
/// PMI_RANK/PMI_SIZE/MPI_LOCALRANKID/MPI_LOCALNRANKS, torchrun's RANK/WORLD_SIZE/LOCAL_RANK/
/// LOCAL_WORLD_SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID and this node's entry
/// (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE ("2(x3),1"), checked in
/// that order (torchrun before Slurm: a torchrun job inside a Slurm allocation inherits the
/// allocation's variables too). A local rank or local world size the launcher does not give is
/// taken to be the global one. Without any launcher, a world of one. `getenv` is a parameter so tests can pass their own
/// environment; a malformed value is a clear error.
LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv = [](const char* name) {
  return std::getenv(name);
});

}  // namespace lockstep
