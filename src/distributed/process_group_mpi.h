/// \file
/// The MPI side of Lockstep: starting and stopping MPI, and the MPI backend of ProcessGroup
/// (torch's ProcessGroupMPI). MPI is both the launcher (`mpirun` starts the ranks and tells each
/// its number) and the communication library for CPU tensors; CUDA tensors are staged through
/// pinned host buffers. In a build without MPI these functions throw a clear error.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/watchdog.h"

namespace lockstep {

/// Whether this build has MPI (CMake found it).
bool built_with_mpi();

namespace mpi {

/// Starts MPI once per process (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE: each process
/// group's worker thread calls MPI, and so may the watchdogs while a worker waits in a
/// collective; MPI_THREAD_SERIALIZED is the least accepted). Started without `mpirun`, MPI runs
/// as a world of one. Then creates the reduction ops for f16 and bf16, which MPI lacks
/// (distributed/mpi_reduce_ops.h), also if MPI was started by someone else, and, in a job of
/// several ranks with MPI_THREAD_MULTIPLE, starts the progress service (see ask_peers).
/// Calling it again does nothing. Collective on first call: every rank calls it.
void initialize();
/// Whether the progress service runs: this rank answers other ranks' watchdogs, and can ask.
bool progress_service_running();
/// Asks every other rank, through the progress service, for its progress on process group
/// `group_id` (Watchdog::progress_of_group there), waiting at most `grace_s` seconds for the
/// answers. Indexed by rank; nothing for this rank and for ranks that did not answer in time
/// (stopped, frozen, or gone).
std::vector<std::optional<PeerProgress>> ask_peers(uint64_t group_id, double grace_s);
/// Whether initialize() has run and finalize() has not.
bool is_initialized();
/// This process's rank in MPI_COMM_WORLD and the world's size.
std::pair<int, int> world_rank_and_size();
/// This process's rank among the ranks on its own machine, and how many there are (from the
/// ranks that share memory with it, so it is right under any launcher).
std::pair<int, int> node_rank_and_size();
/// Stops the progress service, frees the 16-bit reduction ops and shuts MPI down (MPI_Finalize): every rank must call it,
/// after its last collective.
void finalize();
/// Ends every rank of the job at once with exit status `code` (MPI_Abort). A rank that fails
/// alone must call this: leaving quietly would leave the others waiting in their next
/// collective forever.
[[noreturn]] void abort(int code);

}  // namespace mpi

/// A process group over all ranks of MPI_COMM_WORLD (a duplicate of it, so that its messages
/// never mix with anyone else's). One worker thread per group runs the collectives in the order
/// they were started, which is what lets `_async` calls overlap with the caller's work.
/// Supports f32, f64, f16, bf16, i64, i32 and u8 tensors on the CPU or (staged) on a GPU. MPI
/// has no 16-bit float: f16 and bf16 travel as their bytes, half those of f32, and their sums
/// and maxima are computed in float and rounded to 16 bits once per pair of partial results.
/// Its watchdog asks the other ranks through mpi::ask_peers and ends the job with MPI_Abort.
std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options = ProcessGroupOptions());

/// The watchdog hooks of a group that runs over MPI (either backend): ask the other ranks
/// through the progress service, if it runs, and end the job with MPI_Abort.
WatchdogHooks mpi_watchdog_hooks();

}  // namespace lockstep
