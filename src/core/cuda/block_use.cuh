// What GPU work tells Lockstep's allocators, or asks them, about the blocks of memory it uses,
// so that a block is not handed out again while queued work still reads or writes it.
#pragma once

#include <cuda_runtime.h>

#include "core/device.h"

namespace lockstep::cuda {

// Records that work queued on `stream` reads or writes the pinned block starting at `block`
// (a Storage's data()); the block is not handed out again until that work is done. Blocks not
// from the pinned allocator are ignored.
void record_pinned_use(void* block, cudaStream_t stream);

// The stream whose free list the block at `block` (a Storage's data() on GPU `device`) joins
// when it is freed, and whose later work may get it next: work on another stream that uses the
// block must be ordered before that stream's later work. Null for memory that is not a live
// block of Lockstep's allocator.
cudaStream_t allocation_stream(Device device, void* block);

}  // namespace lockstep::cuda
