/// \file
/// Starting a distributed program: who launched us (mpirun, srun, torchrun or nobody), which rank
/// this process is, the default process group (torch.distributed.init_process_group), and
/// logging that says which rank is speaking.
///
/// A program is written once and started N times: `mpirun -n 2 ./chapter4` runs two copies of
/// the same program, which differ only in the rank the launcher gave each of them.
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "core/device.h"
#include "distributed/process_group.h"

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
/// taken to be the global one; init_process_group replaces them with what MPI says.
/// Without any launcher, a world of one. `getenv` is a parameter so tests can pass their own
/// environment; a malformed value is a clear error.
LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv = [](const char* name) {
  return std::getenv(name);
});

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


/// Starts MPI and creates the default process group with `backend` ("mpi", or "nccl" on GPU
/// `device`); from then on, a rank that stops on an error calls abort_job, so as not to leave
/// the other ranks waiting. Returns the group; it is also available through
/// default_process_group(). The process groups run over MPI, so the job must be started by an
/// MPI launcher (mpirun, or srun with MPI support); MPI's rank and world size replace the
/// launcher's. torchrun starts processes but no MPI job: when its world size differs from MPI's,
/// it is an error that says so, instead of N separate one-rank jobs. `options` sets the
/// collective timeout and debug level of both groups (the environment's, by default: see
/// ProcessGroupOptions).
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, Device device = Device::cpu(),
                                                 const ProcessGroupOptions& options = ProcessGroupOptions());

/// Whether init_process_group has run and destroy_process_group has not.
bool is_initialized();

/// The group init_process_group created; an error before that.
ProcessGroup& default_process_group();

/// A group that can send CPU tensors: the default group itself with the MPI backend; with NCCL,
/// the MPI group that started it (like a "gloo" group beside an "nccl" one in PyTorch).
ProcessGroup& cpu_process_group();

/// Waits for the last collectives, destroys the groups and shuts MPI down. Every rank calls it
/// at the end (it also runs at exit if the program forgot).
void destroy_process_group();

/// Ends every rank of the job at once with `exit_code` (MPI_Abort), for a rank whose program
/// stops on an error: the others would otherwise wait for it in their next collective forever.
/// It acts once init_process_group has started MPI (even if setting up the group then failed)
/// and until destroy_process_group, in a job of more than one rank; otherwise it returns, and
/// the caller ends its process as usual.
void abort_job(int exit_code);

/// "[rank R/W] ": the prefix of every line a rank prints, so interleaved output can be told
/// apart. Empty before init_process_group.
std::string rank_prefix();

/// Prints `line` (and a newline) on stdout with this rank's prefix, in one write.
void log_rank(const std::string& line);

/// Prints `line` (and a newline) on stdout on rank 0 only, without a prefix: for what every rank
/// knows equally (the configuration, all-reduced results).
void print_rank0(const std::string& line);

}  // namespace lockstep
