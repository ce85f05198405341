// A build without MPI (CMake found none): the MPI functions exist but say how to get MPI.
// (mpi_runtime.cpp and process_group_mpi.cpp replace this file when CMake finds MPI.)
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "distributed/process_group_mpi.h"

namespace lockstep {

namespace {
[[noreturn]] void throw_built_without_mpi() {
  throw Error(
      "Lockstep was built without MPI, which distributed training needs (install libopenmpi-dev and openmpi-bin, "
      "then rebuild from a clean build directory)");
}
}  // namespace

bool built_with_mpi() { return false; }

namespace mpi {
void initialize() { throw_built_without_mpi(); }
bool is_initialized() { return false; }
std::pair<int, int> world_rank_and_size() { throw_built_without_mpi(); }
std::pair<int, int> node_rank_and_size() { throw_built_without_mpi(); }
bool progress_service_running() { return false; }
std::vector<std::optional<PeerProgress>> ask_peers(uint64_t, double) { throw_built_without_mpi(); }
void finalize() {}
void abort(int code) { std::exit(code); }
}  // namespace mpi

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions&) { throw_built_without_mpi(); }

WatchdogHooks mpi_watchdog_hooks() { throw_built_without_mpi(); }

}  // namespace lockstep
