/// \file
/// Storage: one reference-counted block of device memory. Several tensors (views) may share it.
#pragma once

#include <cstddef>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"

namespace lockstep {

/// A block of `nbytes` bytes on one device, freed through its allocator when the last tensor
/// that views it goes away (tensors hold it by std::shared_ptr).
class Storage {
 public:
  /// Allocates `nbytes` on `allocator`'s device. The bytes are uninitialised.
  Storage(size_t nbytes, Allocator& allocator);
  /// Returns the memory to the allocator.
  ~Storage();
  Storage(const Storage&) = delete;             ///< Storage is never copied, only shared.
  Storage& operator=(const Storage&) = delete;  ///< Storage is never copied, only shared.

  /// Pointer to the first byte.
  void* data() const { return data_; }
  /// Size in bytes.
  size_t nbytes() const { return nbytes_; }
  /// The device the memory lives on.
  Device device() const { return allocator_.device(); }
  /// Whether the memory is pinned host memory.
  bool pinned() const { return allocator_.pinned(); }

 private:
  void* data_;
  size_t nbytes_;
  Allocator& allocator_;
};

}  // namespace lockstep
