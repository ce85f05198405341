// What a CUDA graph (core/cuda/graph.h) asks of the caching allocator: while it captures, the
// blocks its work allocates come from a pool of its own and stay out of everyone else's reach
// until the graph is reset (core/cuda/caching_allocator.cu says how).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/device.h"

namespace lockstep::cuda {

// Names one graph's pool of blocks (never 0, which stands for the shared cache).
using GraphPoolId = int64_t;

// From now until end_graph_capture, blocks allocated for work on `stream` of `device` come from
// `pool`, and any other block freed meanwhile is held by `pool`.
void begin_graph_capture(Device device, cudaStream_t stream, GraphPoolId pool);
// Ends the capture begun by begin_graph_capture on `device`.
void end_graph_capture(Device device);
// Hands `pool`'s free blocks to the shared cache and its held ones back where they came from
// (its graph will not replay again); its blocks still in use join the cache when freed.
void release_graph_pool(Device device, GraphPoolId pool);

}  // namespace lockstep::cuda
