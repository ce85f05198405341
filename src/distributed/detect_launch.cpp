#include "distributed/detect_launch.h"

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "core/error.h"

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
  LOCKSTEP_FAIL("launch: $SLURM_NODEID is ", node, " but $", name, " (\"", list, "\") lists only ",
                first_node_of_run, " node(s)");
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

}  // namespace lockstep
