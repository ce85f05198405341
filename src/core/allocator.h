/// \file
/// Where tensor memory comes from. Each device has one Allocator; the CPU's hands out
/// 64-byte aligned blocks (one cache line, and enough for any SIMD load).
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

/// The process-wide CPU allocator (64-byte aligned, thread-safe).
Allocator& cpu_allocator();

/// The allocator for `device`; asking for a CUDA device explains why it is not available.
Allocator& allocator_for(Device device);

}  // namespace lockstep
