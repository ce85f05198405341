#include "distributed/launch.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "distributed/process_group_mpi.h"
#include "distributed/process_group_nccl.h"

namespace lockstep {

namespace {

// One launcher's names for rank, world size, local rank and local world size (null for Slurm,
// whose count of tasks on this node is read from a list: slurm_tasks_on_this_node).
struct LauncherVariables {
  const char* launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr LauncherVariables kLaunchers[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

std::optional<int> read_int(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* text = getenv(name);
  if (text == nullptr) return std::nullopt;
  size_t used = 0;
  int value = -1;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LOCKSTEP_CHECK(used > 0 && text[used] == '\0' && value >= 0, "launch: expected a non-negative integer in $", name,
                 ", got \"", text, "\"");
  return value;
}

// How many of the job step's tasks Slurm placed on this node. SLURM_STEP_TASKS_PER_NODE (set
// by srun; a batch script has only the job's SLURM_TASKS_PER_NODE) gives every node's count in
// node order, runs of equal counts compressed: "2(x3),1" means 2, 2, 2 and 1. SLURM_NODEID is
// this node's place in that list (under srun, its index among the step's nodes; in a batch
// script, 0). (SLURM_NTASKS_PER_NODE is not used: it is what --ntasks-per-node asked for, set
// only when asked, and Slurm may place fewer tasks.)
std::optional<int> slurm_tasks_on_this_node(const std::function<const char*(const char*)>& getenv) {
  const char* name = getenv("SLURM_STEP_TASKS_PER_NODE") != nullptr ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const char* list = getenv(name);
  if (list == nullptr) return std::nullopt;
  const int node = read_int(getenv, "SLURM_NODEID").value_or(0);
  // Runs separated by commas; a run is a count, then optionally "(xN)" for N nodes in a row.
  // Read by hand, one character at a time: a list may have thousands of runs, and a regex
  // (libstdc++'s recurses per character) would overflow the stack on it.
  const auto malformed = [&] {
    return Error(detail::concat("launch: expected a list like \"2(x3),1\" in $", name, ", got \"", list, "\""));
  };
  // Counts of tasks and of nodes are at least 1, and no more than a job could have.
  const auto count_at = [&](const char*& p) {
    int64_t value = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
      if (digits < 10) value = value * 10 + (*p - '0');
    }
    if (digits == 0) throw malformed();
    LOCKSTEP_CHECK(digits <= 9 && value >= 1, "launch: expected counts from 1 to 999999999 in $", name, ", got \"",
                   list, "\"");
    return static_cast<int>(value);
  };
  int64_t first_node_of_run = 0;
  std::optional<int> found;
  for (const char* p = list;;) {
    const int tasks = count_at(p);
    int nodes = 1;
    if (*p == '(') {
      if (p[1] != 'x') throw malformed();
      p += 2;
      nodes = count_at(p);
      if (*p != ')') throw malformed();
      ++p;
    }
    // The whole list is checked, also past this node's run.
    if (!found && node < first_node_of_run + nodes) found = tasks;
    first_node_of_run += nodes;
    if (*p == '\0') break;
    if (*p != ',') throw malformed();
    ++p;
  }
  if (found) return found;
  throw Error(detail::concat("launch: $SLURM_NODEID is ", node, " but $", name, " (\"", list, "\") lists only ",
                             first_node_of_run, " node(s)"));
}

// Everything init_process_group sets up, torn down by destroy_process_group.
struct DistributedState {
  LaunchInfo launch;
  std::shared_ptr<ProcessGroup> default_group;
  std::shared_ptr<ProcessGroup> cpu_group;
};

DistributedState& state() {
  static DistributedState s;
  return s;
}

}  // namespace

LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv) {
  for (const LauncherVariables& vars : kLaunchers) {
    const std::optional<int> rank = read_int(getenv, vars.rank);
    const std::optional<int> world = read_int(getenv, vars.world_size);
    if (!rank || !world) continue;
    LaunchInfo info;
    info.launcher = vars.launcher;
    info.rank = *rank;
    info.world_size = *world;
    LOCKSTEP_CHECK(info.world_size >= 1 && info.rank < info.world_size, "launch: ", vars.launcher, " says rank ",
                   info.rank, " of ", info.world_size, ", which is not a rank of that world");
    info.local_rank = read_int(getenv, vars.local_rank).value_or(info.rank);
    info.local_world_size = (vars.local_world_size != nullptr ? read_int(getenv, vars.local_world_size)
                                                              : slurm_tasks_on_this_node(getenv))
                                 .value_or(info.world_size);
    return info;
  }
  return LaunchInfo{};
}

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

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, Device device,
                                                 const ProcessGroupOptions& options) {
  DistributedState& s = state();
  LOCKSTEP_CHECK(s.default_group == nullptr, "init_process_group: already initialised (call it once per process)");
  LOCKSTEP_CHECK(backend == "mpi" || backend == "nccl", "init_process_group: expected backend \"mpi\" or \"nccl\", got \"",
                 backend, "\" (choose_backend resolves \"auto\")");
  s.launch = detect_launch();
  // MPI is the launcher's other half: it knows the ranks for certain, whoever started us.
  s.cpu_group = make_mpi_process_group(options);
  // torchrun starts processes but no MPI job: MPI sees each as a one-rank job of its own, and
  // each would train alone on the whole dataset, without a word. (Other launchers are MPI's
  // own, or Slurm's, whose variables a batch script also holds when it runs one process.)
  if (s.launch.launcher == "torchrun" && s.launch.world_size != s.cpu_group->size()) {
    const std::string message = detail::concat(
        "init_process_group: torchrun started a job of ", s.launch.world_size, " process(es), but MPI sees ",
        s.cpu_group->size(), "; Lockstep's process groups run over MPI, so start the job with mpirun -n ",
        s.launch.world_size, " (or srun with MPI support)");
    // Nothing to retry: shut MPI down, so the process can end cleanly.
    destroy_process_group();
    throw Error(message);
  }
  const auto [node_rank, node_size] = mpi::node_rank_and_size();
  s.launch.rank = s.cpu_group->rank();
  s.launch.world_size = s.cpu_group->size();
  s.launch.local_rank = node_rank;
  s.launch.local_world_size = node_size;
  // MPI must be shut down before the process ends, even when setting up NCCL fails (with one
  // rank; with more, abort_job ends the job). Registered after state() exists: statics made
  // before an exit function is registered are destroyed after it runs.
  static const bool registered = std::atexit([] { destroy_process_group(); }) == 0;
  (void)registered;
  s.default_group = backend == "nccl" ? make_nccl_process_group(s.cpu_group, device, options) : s.cpu_group;
  return s.default_group;
}

bool is_initialized() { return state().default_group != nullptr; }

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
  // The NCCL group first (it was built on the MPI one), then the MPI group, whose destructor
  // waits for its worker to finish the collectives still queued; MPI itself last.
  s.default_group.reset();
  s.cpu_group.reset();
  mpi::finalize();
}

void abort_job(int exit_code) {
  // From the moment MPI knows the ranks, including while NCCL is set up (where the other ranks
  // wait for rank 0's unique id), a failing rank takes the others down with it: they would
  // otherwise wait in their next collective for a rank that will never come.
  const DistributedState& s = state();
  if (s.cpu_group != nullptr && s.launch.world_size > 1) mpi::abort(exit_code);
}

std::string rank_prefix() {
  if (!is_initialized()) return "";
  return "[rank " + std::to_string(state().launch.rank) + "/" + std::to_string(state().launch.world_size) + "] ";
}

void log_rank(const std::string& line) {
  // One write of the whole line, so that lines of different ranks do not interleave mid-line.
  std::cout << (rank_prefix() + line + "\n") << std::flush;
}

void print_rank0(const std::string& line) {
  if (is_initialized() && state().launch.rank != 0) return;
  std::cout << line << "\n" << std::flush;
}

}  // namespace lockstep
