/// \file
/// The default process group (torch.distributed's init_process_group and its companions): the
/// group a job's collectives run on unless told otherwise, created once per process by
/// init_process_group and ended by destroy_process_group, and abort_job, with which a failing
/// rank ends the job instead of leaving the others waiting.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "core/device.h"
#include "distributed/process_group.h"

namespace lockstep {

/// Starts MPI and creates the default process group with `backend` ("mpi", or "nccl" on GPU
/// `device`); from then on, a rank that stops on an error calls abort_job, so as not to leave
/// the other ranks waiting. Returns the group; it is also available through
/// default_process_group(). The process groups run over MPI, so the job must be started by an
/// MPI launcher (mpirun, or srun with MPI support); MPI's rank and world size replace the
/// launcher's. torchrun starts processes but no MPI job: when its world size differs from MPI's,
/// it is an error that says so, instead of N separate one-rank jobs. `options` sets the
/// collective timeout and debug level of both groups (the environment's, by default: see
/// ProcessGroupOptions); when they cannot be read on some rank, or differ between ranks, every
/// rank throws the same AgreedError, with MPI already shut down.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, Device device = Device::cpu(),
                                                 const ProcessGroupOptions& options = ProcessGroupOptions());

/// Whether init_process_group has run and destroy_process_group has not.
bool is_initialized();

/// The group init_process_group created; an error before that.
ProcessGroup& default_process_group();

/// A group that can send CPU tensors: the default group itself with the MPI backend; with NCCL,
/// the MPI group that started it (like a "gloo" group beside an "nccl" one in PyTorch).
ProcessGroup& cpu_process_group();

/// Another process group over every rank (torch.distributed.new_group()), with the MPI backend
/// and init_process_group's options: its collectives never pair with another group's, so a
/// helper can run its own (a check at every step, say) without changing the order of the
/// training's. `debug`, when given, replaces init_process_group's debug level: a group whose
/// collectives are the same on every rank by construction can leave DETAIL's fingerprint
/// checks out, which would otherwise make its collectives wait for each other. Collective:
/// every rank creates its groups in the same order. Valid until destroy_process_group, which
/// destroys it with the others; an error before init_process_group.
ProcessGroup& new_group(std::optional<DistributedDebug> debug = std::nullopt);

/// Waits for the last collectives, destroys the groups and shuts MPI down. Every rank calls it
/// at the end (it also runs at exit if the program forgot).
void destroy_process_group();

/// Ends every rank of the job at once with `exit_code` (MPI_Abort), for a rank whose program
/// stops on an error: the others would otherwise wait for it in their next collective forever.
/// It acts once init_process_group has started MPI (even if setting up the group then failed)
/// and until destroy_process_group, in a job of more than one rank; otherwise it returns, and
/// the caller ends its process as usual.
void abort_job(int exit_code);

/// How a rank leaves a job after `error` stopped its program: if every rank raised it together
/// (an AgreedError), by destroying the process group with the others, so that each ends with a
/// clean exit; otherwise by abort_job(`exit_code`). Returns where the process may exit on its own.
void leave_job_after(const std::exception& error, int exit_code);

}  // namespace lockstep
