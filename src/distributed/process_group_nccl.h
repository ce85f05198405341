/// \file
/// The NCCL backend of ProcessGroup (torch's ProcessGroupNCCL): collectives between GPUs, one GPU
/// per rank, run by NVIDIA's NCCL on a communication stream of its own so that they overlap with
/// the computation. In a build without CUDA or NCCL these functions throw a clear error.
///
/// Ordering, as in PyTorch: a collective waits (on the GPU, through a CUDA event) for the work
/// already queued on the caller's current stream, so it reads the values the caller computed;
/// Work::wait() makes the caller's current stream wait for the collective, so later kernels see
/// its result. Neither blocks the CPU.
#pragma once

#include <memory>

#include "core/device.h"
#include "distributed/process_group.h"

namespace lockstep {

/// Whether this build has the NCCL backend (CMake found CUDA and NCCL).
bool built_with_nccl();

/// A process group over the same ranks as `bootstrap`, each rank using the GPU `device`.
/// NCCL's unique id is created on rank 0 and sent to the others through `bootstrap` (an MPI
/// group: MPI_Bcast). Two ranks may not use the same GPU; NCCL refuses it ("Duplicate GPU
/// detected"), so the error says to use the MPI backend instead. Supports f32, f64, f16, bf16,
/// i64, i32 and u8 tensors on `device`. Its watchdog (settings from `options`) polls each
/// collective's completion and NCCL's asynchronous errors, and on a timeout or an error aborts
/// the communicator (ncclCommAbort) before ending the job, as PyTorch's NCCL watchdog does.
std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<ProcessGroup>& bootstrap, Device device,
                                                      const ProcessGroupOptions& options = ProcessGroupOptions());

}  // namespace lockstep
