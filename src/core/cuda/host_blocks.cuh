// How a copy tells the pinned-memory allocator that a pinned block is in use by the GPU.
#pragma once

#include <cuda_runtime.h>

namespace lockstep::cuda {

// Records that work queued on `stream` reads or writes the pinned block starting at `block`
// (a Storage's data()); the block is not handed out again until that work is done. Blocks not
// from the pinned allocator are ignored.
void record_pinned_use(void* block, cudaStream_t stream);

}  // namespace lockstep::cuda
