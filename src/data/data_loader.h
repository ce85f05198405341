/// \file
/// DataLoader (torch.utils.data.DataLoader): walks a dataset in batches, in the order a Sampler
/// chooses, while a background thread prepares the next batches.
///
///     DataLoader loader(train, DataLoaderOptions(64).sampler(std::make_shared<RandomSampler>(train->size(), seed)));
///     for (int64_t epoch = 0; epoch < epochs; ++epoch) {
///       loader.sampler().set_epoch(epoch);
///       for (const Batch& batch : loader) { ... }  // batch.inputs: (64, ...), batch.targets: (64)
///     }
///
/// Threading. Each `begin()` starts an epoch: it asks the sampler for the epoch's indices (on
/// the calling thread), cuts them into batches, and, when `prefetch` > 0, starts one worker
/// thread that calls Dataset::get_batch for batch after batch and hands them over through a
/// queue of at most `prefetch` batches. The worker waits while the queue is full, so it runs at
/// most `prefetch` batches ahead and uses bounded memory; the loop takes batches from the queue
/// in order, so the batches are exactly those of `prefetch` = 0, where get_batch runs on the
/// calling thread as the loop advances. An exception thrown by get_batch on the worker is
/// carried through the queue and rethrown by the loop at that batch. Leaving a loop early
/// (break, exception) is safe: the worker is stopped and joined when the next epoch begins or
/// the DataLoader is destroyed, whichever comes first. Only one epoch runs at a time: calling
/// begin() again abandons the previous one (and invalidates its iterators).
///
/// Pinned batches. With `pin_memory(true)` (torch's `DataLoader(pin_memory=True)`) each batch is
/// copied into pinned (page-locked) host memory right after get_batch, on the worker thread when
/// prefetching, so that the training loop can send it to the GPU with
/// `batch.inputs.to(device, true)`: a copy the GPU's copy engine reads straight from host memory
/// while the CPU goes on. Pinning needs a CUDA device; where there is none (a CPU-only build, or
/// no GPU) the DataLoader's constructor throws, rather than quietly handing out pageable memory
/// as PyTorch does after a warning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>

#include "data/dataset.h"
#include "data/sampler.h"

namespace lockstep {

/// Settings of a DataLoader, set by chaining: `DataLoaderOptions(64).drop_last(true)`.
class DataLoaderOptions {
 public:
  /// Options with `batch_size` samples per batch and every other setting at its default.
  explicit DataLoaderOptions(int64_t batch_size = 1) : batch_size_(batch_size) {}
  /// Sets the number of samples per batch (default 1).
  DataLoaderOptions& batch_size(int64_t value) { batch_size_ = value; return *this; }
  /// Sets whether to drop the last batch of an epoch when it is smaller than batch_size
  /// (default false: keep it).
  DataLoaderOptions& drop_last(bool value) { drop_last_ = value; return *this; }
  /// Sets the sampler that orders the samples (default: a SequentialSampler over the dataset).
  /// For a shuffled order (PyTorch's shuffle=True) pass a RandomSampler.
  DataLoaderOptions& sampler(std::shared_ptr<Sampler> value) { sampler_ = std::move(value); return *this; }
  /// Sets how many batches a background thread prepares ahead of the loop (default 2);
  /// 0 prepares each batch on the calling thread when it is needed.
  DataLoaderOptions& prefetch(int64_t value) { prefetch_ = value; return *this; }
  /// Sets whether batches are returned in pinned host memory, ready for a non-blocking copy to
  /// a GPU (default false; needs a CUDA device).
  DataLoaderOptions& pin_memory(bool value) { pin_memory_ = value; return *this; }

  /// Samples per batch.
  int64_t batch_size() const { return batch_size_; }
  /// Whether a smaller last batch is dropped.
  bool drop_last() const { return drop_last_; }
  /// The sampler (null: sequential).
  const std::shared_ptr<Sampler>& sampler() const { return sampler_; }
  /// Batches prepared ahead.
  int64_t prefetch() const { return prefetch_; }
  /// Whether batches are pinned.
  bool pin_memory() const { return pin_memory_; }

 private:
  int64_t batch_size_;
  bool drop_last_ = false;
  std::shared_ptr<Sampler> sampler_;
  int64_t prefetch_ = 2;
  bool pin_memory_ = false;
};

/// Iterates over a dataset in batches, one epoch per range-for loop (see the file comment for
/// the threading). Not copyable; iterate it from one thread at a time.
///
/// \see @ref chapter2 "Chapter 2: Training on one device", which introduces it.
class DataLoader {
  class Epoch;

 public:
  /// The input iterator of one epoch: dereferencing gives the current batch. A
  /// default-constructed Iterator is the end.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;  ///< Single pass.
    using value_type = Batch;                           ///< What it yields.
    using difference_type = std::ptrdiff_t;             ///< Required by iterator traits.
    using pointer = const Batch*;                       ///< Pointer to the current batch.
    using reference = const Batch&;                     ///< The current batch.

    /// The end of an epoch.
    Iterator() = default;
    /// The current batch (valid until the iterator advances).
    const Batch& operator*() const;
    /// Member access to the current batch.
    const Batch* operator->() const { return &**this; }
    /// Moves to the next batch; rethrows an exception the dataset threw while preparing it.
    Iterator& operator++();
    /// Whether both are at the end, or at the same position of the same epoch.
    bool operator==(const Iterator& other) const;
    /// Negation of ==.
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class DataLoader;
    explicit Iterator(Epoch* epoch) : epoch_(epoch) {}
    Epoch* epoch_ = nullptr;
  };

  /// A loader over `dataset` with `options`. Throws if the batch size is below 1, prefetch
  /// is negative, or pin_memory is asked for without a usable CUDA device. (Indices the sampler yields are checked against the dataset by get_batch.)
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = DataLoaderOptions());
  /// Stops and joins the worker thread of an unfinished epoch.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;             ///< Owns a thread; not copyable.
  DataLoader& operator=(const DataLoader&) = delete;  ///< Owns a thread; not copyable.

  /// Starts an epoch and returns an iterator at its first batch. Throws if preparing the first
  /// batch throws.
  Iterator begin();
  /// The end of the epoch.
  Iterator end() { return Iterator(); }
  /// Batches per epoch (len(loader)): ceil(samples / batch_size), or floor with drop_last.
  int64_t size() const;

  /// The dataset.
  const Dataset& dataset() const { return *dataset_; }
  /// The sampler, e.g. to call set_epoch.
  Sampler& sampler() const { return *sampler_; }
  /// The options the loader was made with (the sampler filled in).
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<Sampler> sampler_;
  DataLoaderOptions options_;
  std::unique_ptr<Epoch> epoch_;  // the epoch being iterated (and its worker thread)
};

}  // namespace lockstep
