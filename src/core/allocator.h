/// \file
/// Where tensor memory comes from. Each device has one Allocator; the CPU's hands out
/// 64-byte aligned blocks (one cache line, and enough for any SIMD load).
///
/// Both the CPU and the CUDA allocators cache: a freed block is kept on a free list for its
/// size class and handed out again for the next request of that class, because a training
/// step frees and reallocates the same sizes every iteration. On the CPU only blocks of
/// 128 KiB and more are kept (smaller ones malloc already reuses well); the largest would
/// otherwise go back to the kernel on every free and be page-faulted in again on every batch.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace lockstep {

/// Hands out and takes back raw memory on one device.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `nbytes` of memory (a valid, unique pointer even for 0 bytes); throws on failure.
  virtual void* allocate(size_t nbytes) = 0;
  /// Returns memory obtained from allocate() with the same `nbytes`.
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  /// The device this allocator serves.
  virtual Device device() const = 0;
  /// Whether the memory is pinned (page-locked) host memory, which GPUs can copy from directly.
  virtual bool pinned() const { return false; }
};

/// Alignment of every CPU allocation, in bytes.
constexpr size_t kCpuAlignment = 64;

/// The size class a request of `nbytes` is rounded up to by the caching allocators: multiples
/// of 512 bytes up to 1 MiB, multiples of 2 MiB above (so a slightly smaller last batch
/// reuses the blocks of the full ones).
size_t size_class(size_t nbytes);

/// The process-wide CPU allocator (64-byte aligned, thread-safe, caches blocks of 128 KiB and more).
Allocator& cpu_allocator();

/// What the CPU allocator has handed out, in bytes as asked for (torch.cuda.memory_stats's
/// allocated bytes, for the CPU).
struct CpuMemoryStats {
  int64_t allocated_bytes = 0;       ///< In blocks handed out and not yet given back.
  int64_t peak_allocated_bytes = 0;  ///< The highest allocated_bytes since start or the last reset.
};

/// The CPU allocator's counts now.
CpuMemoryStats cpu_memory_stats();

/// Restarts peak_allocated_bytes from the current allocated_bytes.
void reset_cpu_peak_memory_stats();

/// Bytes of freed CPU blocks the CPU allocator keeps for reuse.
size_t cpu_cached_bytes();

/// Returns every cached CPU block to malloc (the CPU's torch.cuda.empty_cache).
void cpu_empty_cache();

/// The allocator for `device`; asking for a CUDA device explains why it is not available.
Allocator& allocator_for(Device device);

}  // namespace lockstep
