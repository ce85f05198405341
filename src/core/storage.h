/// \file
/// Storage: one reference-counted block of device memory. Several tensors (views) may share it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"
#include "core/memory_ledger.h"

namespace lockstep {

/// A block of `nbytes` bytes on one device, freed through its allocator when the last tensor
/// that views it goes away (tensors hold it by std::shared_ptr). While it lives its bytes count
/// in the memory ledger (core/memory_ledger.h) under one category.
///
/// \see @ref chapter1 "Chapter 1: Tensors, autograd and devices", which introduces it.
class Storage {
 public:
  /// Allocates `nbytes` on `allocator`'s device, counted under this thread's
  /// current_memory_category(). The bytes are uninitialised.
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

  /// What the memory is for, in the memory ledger.
  MemoryCategory category() const { return category_; }
  /// Counts the memory under `category` from now on: how an owner claims memory that was
  /// allocated elsewhere (a gradient autograd computed, an all-gather's output kept as a shard).
  void set_category(MemoryCategory category);

  /// How many in-place changes the data has had (PyTorch's `tensor._version`). It lives here,
  /// with the data, so that every view of the data and every detach() of it share one count.
  int64_t version() const { return version_.load(std::memory_order_relaxed); }
  /// Counts one more in-place change (atomic: DataParallel's replicas run on several threads).
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  /// Sets the count back to `version`, which it had before a write that put back the very
  /// values it held then (torch.autograd._unsafe_preserve_version_counter). Only FSDP does this:
  /// it refills a freed parameter with the values autograd saved, and the saved tensors, which
  /// compare versions, must go on accepting it.
  void restore_version(int64_t version) { version_.store(version, std::memory_order_relaxed); }

  /// Gives the memory back to the allocator and takes `nbytes` new, uninitialised bytes in its
  /// place (PyTorch's `untyped_storage().resize_(nbytes)`, which FSDP uses the same way): every
  /// tensor viewing this storage keeps its shape, and sees the new bytes. Resizing to 0 frees the
  /// memory while the tensors live on; reading one of them then is an error (Tensor::data), until
  /// a resize back gives it bytes again.
  void resize(size_t nbytes);

 private:
  void* data_;
  size_t nbytes_;
  Allocator& allocator_;
  MemoryCategory category_;
  std::atomic<int64_t> version_{0};
};

}  // namespace lockstep
