/// \file
/// The MPI_Op that reduces tensors of each dtype. MPI knows float and double but no 16-bit
/// float, so f16 and bf16 tensors travel as MPI_UINT16_T (their bytes, unchanged) and are
/// reduced by ops of Lockstep's own (MPI_Op_create). Each widens a pair of elements to float,
/// combines them and rounds the result to 16 bits once, as NCCL's 16-bit reductions do on a GPU.
/// The ops are created when MPI starts (mpi::initialize) and freed before it stops
/// (mpi::finalize).
#pragma once

#include <mpi.h>

#include "core/dtype.h"
#include "distributed/process_group.h"

namespace lockstep::mpi {

/// The MPI_Op that combines two elements of `dtype` by `op`. ReduceOp::Avg gives the sum's op:
/// MPI has no average, so the caller divides the sum by the number of ranks afterwards.
MPI_Op reduce_op(DType dtype, ReduceOp op);

/// Creates the ops for f16 and bf16 (MPI_Op_create). Needs MPI started; a second call does
/// nothing.
void create_16bit_ops();
/// Frees the ops that create_16bit_ops() made (MPI_Op_free); call it before MPI_Finalize.
void free_16bit_ops();

}  // namespace lockstep::mpi
