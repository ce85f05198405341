/// \file
/// GPU memory through a caching allocator, as PyTorch's CUDACachingAllocator does it.
///
/// cudaMalloc and cudaFree are slow (cudaFree even waits for the whole GPU), and a training
/// step frees and reallocates the same activation sizes every iteration. So a freed block is
/// not returned to the driver: it goes onto a free list for its size class, and the next
/// request of that class takes it back. After the first step, a training loop allocates
/// nothing from the driver at all. Reuse is safe without events because free lists are kept
/// per stream: a block freed by the host is reused only by work on the stream it was allocated
/// for, queued after the work that last used it there. (A tensor also used on another stream,
/// as chapter 3's replicas do, must stay alive until that stream is done with it.) Setting
/// LOCKSTEP_NO_CUDA_MEMORY_CACHING=1 turns the cache off, so that compute-sanitizer sees every
/// tensor's exact bounds (PyTorch: PYTORCH_NO_CUDA_MEMORY_CACHING=1).
///
/// Pinned (page-locked) host memory is what makes host-to-device copies fast and truly
/// asynchronous; pin_memory() takes it from a second caching allocator, which reuses a block
/// only after the copies queued on it have completed (they record CUDA events on it).
#pragma once

#include <cstdint>

#include "core/allocator.h"
#include "core/cuda/api.h"

namespace lockstep::cuda {

/// What the caching allocator of one device holds, in bytes (torch.cuda.memory_stats).
struct MemoryStats {
  int64_t allocated_bytes = 0;       ///< In blocks handed out to tensors now.
  int64_t reserved_bytes = 0;        ///< Obtained from cudaMalloc and not released: allocated + cached.
  int64_t peak_allocated_bytes = 0;  ///< Highest allocated_bytes since start or the last reset.
  int64_t cuda_mallocs = 0;          ///< Requests that had to call cudaMalloc.
  int64_t cache_hits = 0;            ///< Requests served from a free list.
};

/// The caching allocator of CUDA device `index`.
LOCKSTEP_CUDA_FN(Allocator& caching_allocator(int index))
/// The allocator of pinned host memory (its device is the CPU).
LOCKSTEP_CUDA_FN(Allocator& pinned_allocator())
/// Statistics of `device`'s caching allocator.
LOCKSTEP_CUDA_FN(MemoryStats memory_stats(Device device))
/// Restarts peak_allocated_bytes from the current allocated_bytes.
LOCKSTEP_CUDA_FN(void reset_peak_memory_stats(Device device))
/// Returns every cached (unused) block of `device` to the driver (torch.cuda.empty_cache).
LOCKSTEP_CUDA_FN(void empty_cache(Device device))

}  // namespace lockstep::cuda
