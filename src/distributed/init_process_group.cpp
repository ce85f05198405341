#include "distributed/init_process_group.h"

#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "distributed/agreed_error.h"
#include "distributed/detect_launch.h"
#include "distributed/process_group_mpi.h"
#include "distributed/process_group_nccl.h"

namespace lockstep {

namespace {

// The groups init_process_group sets up, torn down by destroy_process_group.
struct DistributedState {
  std::shared_ptr<ProcessGroup> default_group;
  std::shared_ptr<ProcessGroup> cpu_group;
  std::vector<std::shared_ptr<ProcessGroup>> new_groups;  // new_group's, in order
  ProcessGroupOptions options;                           // init_process_group's, for new_group
};

DistributedState& state() {
  static DistributedState s;
  return s;
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, Device device,
                                                 const ProcessGroupOptions& options) {
  DistributedState& s = state();
  LOCKSTEP_CHECK(s.default_group == nullptr, "init_process_group: already initialised (call it once per process)");
  LOCKSTEP_CHECK(backend == "mpi" || backend == "nccl", "init_process_group: expected backend \"mpi\" or \"nccl\", got \"",
                 backend, "\" (choose_backend resolves \"auto\")");
  const LaunchInfo launch = detect_launch();
  s.options = options;
  // MPI is the launcher's other half: it knows the ranks for certain, whoever started us. When
  // the ranks' settings are invalid or differ, every rank learns it here together, and shuts
  // MPI down (with its progress service) so that each can leave with a clean exit.
  try {
    s.cpu_group = make_mpi_process_group(options);
  } catch (const AgreedError&) {
    mpi::finalize();
    throw;
  }
  // The launcher's variables and MPI must agree on the job. torchrun starts processes but no MPI
  // job: MPI sees each as a one-rank job of its own, and each would train alone on the whole
  // dataset, without a word. So does another MPI's launcher (MPICH's mpiexec, which sets PMI_*,
  // starting a program built with Open MPI). Slurm's variables are also held by a batch script
  // that runs one process (task 0 of the allocation, a world of one); a task above 0 that MPI
  // sees alone was started by srun without MPI support.
  const int mpi_size = s.cpu_group->size();
  // (Without any launcher's variables, MPI's own rank and size are the job's.)
  const bool known_launcher = launch.launcher != "none";
  const bool slurm_batch_script = launch.launcher == "slurm" && launch.rank == 0 && mpi_size == 1;
  if (known_launcher && launch.world_size != mpi_size && !slurm_batch_script) {
    const bool mpi_launcher = launch.launcher == "openmpi" || launch.launcher == "mpich";
    const std::string message = detail::concat(
        "init_process_group: ", launch.launcher, " says this process is rank ", launch.rank, " of ",
        launch.world_size, ", but MPI sees a job of ", mpi_size, " process(es); Lockstep's process groups run over MPI, ",
        mpi_launcher ? "and this launcher is another MPI's than the one Lockstep was built with: start the job with "
                       "the mpirun of Lockstep's MPI (Debian: Open MPI's), mpirun -n "
                     : "so start the job with mpirun -n ",
        launch.world_size, " (or srun with MPI support, e.g. srun --mpi=pmix)");
    // Nothing to retry: shut MPI down, so the process can end cleanly.
    destroy_process_group();
    throw Error(message);
  }
  // MPI must be shut down before the process ends, even when setting up NCCL fails (with one
  // rank; with more, abort_job ends the job). Registered after state() exists: statics made
  // before an exit function is registered are destroyed after it runs.
  static const bool registered = std::atexit([] { destroy_process_group(); }) == 0;
  (void)registered;
  try {
    s.default_group = backend == "nccl" ? make_nccl_process_group(s.cpu_group, device, options) : s.cpu_group;
  } catch (const AgreedError&) {
    destroy_process_group();
    throw;
  }
  return s.default_group;
}

bool is_initialized() { return state().default_group != nullptr; }

ProcessGroup& new_group(std::optional<DistributedDebug> debug) {
  DistributedState& s = state();
  LOCKSTEP_CHECK(is_initialized(), "new_group: no default process group: call init_process_group first");
  ProcessGroupOptions options = s.options;
  if (debug) options.debug(*debug);
  s.new_groups.push_back(make_mpi_process_group(options));
  return *s.new_groups.back();
}

ProcessGroup& default_process_group() {
  LOCKSTEP_CHECK(is_initialized(), "no default process group: call init_process_group first");
  return *state().default_group;
}

ProcessGroup& cpu_process_group() {
  LOCKSTEP_CHECK(is_initialized(), "no default process group: call init_process_group first");
  return *state().cpu_group;
}

void destroy_process_group() {
  DistributedState& s = state();
  // The MPI group exists from the start of init_process_group, the default group only at its
  // end: an init that failed half-way is shut down here too.
  if (s.cpu_group == nullptr) return;
  // new_group's groups and the NCCL group first (it was built on the MPI one), then the MPI
  // group; each destructor waits for its worker to finish the collectives still queued. MPI
  // itself last.
  s.new_groups.clear();
  s.default_group.reset();
  s.cpu_group.reset();
  mpi::finalize();
}

void abort_job(int exit_code) {
  // From the moment MPI knows the ranks, including while the groups are set up (where the other
  // ranks wait for this one's settings, or for rank 0's NCCL unique id), a failing rank takes
  // the others down with it: they would otherwise wait in their next collective for a rank that
  // will never come.
  if (mpi::is_initialized() && mpi::world_rank_and_size().second > 1) mpi::abort(exit_code);
}

void leave_job_after(const std::exception& error, int exit_code) {
  if (dynamic_cast<const AgreedError*>(&error) != nullptr) {
    destroy_process_group();
  } else {
    abort_job(exit_code);
  }
}

}  // namespace lockstep
