// Starting and stopping MPI (declared in distributed/process_group_mpi.h).
#include <mpi.h>

#include <utility>

#include "distributed/mpi_check.h"
#include "distributed/mpi_reduce_ops.h"
#include "distributed/process_group_mpi.h"

namespace lockstep {

bool built_with_mpi() { return true; }

namespace mpi {

void initialize() {
  int started = 0;
  LOCKSTEP_MPI_CHECK(MPI_Initialized(&started));
  if (!started) {
    // Each process group calls MPI from its own worker thread, one call at a time.
    int provided = 0;
    LOCKSTEP_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    LOCKSTEP_CHECK(provided >= MPI_THREAD_SERIALIZED,
                   "MPI: this MPI library does not allow calls from a thread other than main (it provides thread ",
                   "level ", provided, "); Lockstep needs MPI_THREAD_SERIALIZED");
  }
  // Here, on the main thread before any group's worker calls MPI: the ops that reduce f16 and
  // bf16 tensors, which MPI lacks (also when someone else started MPI).
  create_16bit_ops();
}

bool is_initialized() {
  int started = 0, finished = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&finished);
  return started && !finished;
}

std::pair<int, int> world_rank_and_size() {
  int rank = 0, size = 1;
  LOCKSTEP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  LOCKSTEP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return {rank, size};
}

std::pair<int, int> node_rank_and_size() {
  // The ranks that can share memory with this one are the ranks on this machine.
  MPI_Comm node;
  LOCKSTEP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int rank = 0, size = 1;
  LOCKSTEP_MPI_CHECK(MPI_Comm_rank(node, &rank));
  LOCKSTEP_MPI_CHECK(MPI_Comm_size(node, &size));
  LOCKSTEP_MPI_CHECK(MPI_Comm_free(&node));
  return {rank, size};
}

void finalize() {
  if (!is_initialized()) return;
  free_16bit_ops();
  MPI_Finalize();
}

void abort(int code) {
  if (is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace mpi
}  // namespace lockstep
