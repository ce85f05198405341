/// \file
/// DistributedSampler (torch.utils.data.distributed.DistributedSampler): splits a dataset
/// between the processes of a data-parallel job, so that each rank trains on its own shard and
/// together they visit every sample once per epoch.
///
///     DistributedSampler sampler(train->size(), world_size, rank, DistributedSamplerOptions().seed(seed));
///     for (int64_t epoch = 0; epoch < epochs; ++epoch) {
///       sampler.set_epoch(epoch);  // forget this and every epoch repeats the same order
///       for (int64_t i : sampler.indices()) { ... }
///     }
///
/// The rules are PyTorch's. Without shuffling a job splits its data exactly as torch does;
/// with shuffling the permutation comes from Lockstep's generator, not torch's, so the shards
/// differ from torch's for the same seed while following the same rules:
///
///     num_samples = ceil(N / R)   (floor(N / R) with drop_last)
///     total_size  = num_samples * R
///     order       = shuffle ? randperm(N, Generator(seed + epoch)) : 0, 1, ..., N-1
///     order       = order padded with its own first elements up to total_size (repeated as
///                   often as needed), or cut to total_size with drop_last
///     rank r gets order[r], order[r + R], order[r + 2R], ...  (num_samples indices)
#pragma once

#include <cstdint>
#include <vector>

#include "data/sampler.h"

namespace lockstep {

/// Settings of a DistributedSampler, set by chaining: `DistributedSamplerOptions().seed(7)`.
/// Defaults are PyTorch's.
class DistributedSamplerOptions {
 public:
  /// Sets whether each epoch visits a fresh permutation (default true) or 0, 1, ..., N-1.
  DistributedSamplerOptions& shuffle(bool value) { shuffle_ = value; return *this; }
  /// Sets the seed of the permutations (default 0). Every rank must pass the same seed.
  DistributedSamplerOptions& seed(uint64_t value) { seed_ = value; return *this; }
  /// Sets whether to drop the tail of the order that does not divide evenly between the ranks
  /// (default false: pad the order with repeated samples instead).
  DistributedSamplerOptions& drop_last(bool value) { drop_last_ = value; return *this; }

  /// Whether the order is shuffled.
  bool shuffle() const { return shuffle_; }
  /// The seed of the permutations.
  uint64_t seed() const { return seed_; }
  /// Whether the uneven tail is dropped.
  bool drop_last() const { return drop_last_; }

 private:
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  bool drop_last_ = false;
};

/// Gives one rank of a data-parallel job its shard of every epoch (see the file comment for
/// the exact rules). Every rank gets the same number of indices, num_samples(): each index is
/// one forward and backward pass, and every backward pass ends in collectives (all-reduce of
/// the gradients) that all ranks must join, so a rank with one step more would wait forever
/// for the others.
///
/// \see @ref chapter4 "Chapter 4: DistributedDataParallel", which introduces it.
class DistributedSampler : public Sampler {
 public:
  /// The sampler of rank `rank` out of `num_replicas` over a dataset of `dataset_size`
  /// samples. Throws if num_replicas < 1, rank is outside [0, num_replicas) or the dataset
  /// size is negative; an empty dataset gives empty shards.
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                     const DistributedSamplerOptions& options = DistributedSamplerOptions());

  /// This rank's indices of the current epoch: num_samples() of them, the same on every call
  /// until set_epoch changes the epoch.
  std::vector<int64_t> indices() override;
  /// num_samples().
  int64_t size() const override { return num_samples_; }
  /// Chooses the permutation of the coming epoch (it is only stored). Throws if `epoch` < 0.
  void set_epoch(int64_t epoch) override;

  /// How many ranks share the dataset (the world size).
  int64_t num_replicas() const { return num_replicas_; }
  /// This rank, in [0, num_replicas).
  int64_t rank() const { return rank_; }
  /// The epoch last passed to set_epoch (0 until then).
  int64_t epoch() const { return epoch_; }
  /// Indices per rank and epoch: ceil(N / num_replicas), or floor with drop_last.
  int64_t num_samples() const { return num_samples_; }
  /// Indices per epoch over all ranks: num_samples() * num_replicas().
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace lockstep
