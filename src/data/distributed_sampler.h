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
  /// until set_epoch changes the epoch; fewer in an epoch resumed with resume_at().
  std::vector<int64_t> indices() override;
  /// How many indices indices() returns: num_samples(), or what is left of a resumed epoch.
  int64_t size() const override;
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
  /// The seed of the permutations.
  uint64_t seed() const { return seed_; }
  /// Whether each epoch is shuffled.
  bool shuffle() const { return shuffle_; }
  /// Whether the uneven tail is dropped.
  bool drop_last() const { return drop_last_; }
  /// The number of samples of the dataset (N).
  int64_t dataset_size() const { return dataset_size_; }

  /// Changes the seed of the permutations, for restoring a checkpoint into a sampler built
  /// before it was read (io/checkpoint.h). Every rank must set the same seed.
  void set_seed(uint64_t seed) { seed_ = seed; }

  /// Resumes epoch `epoch` after its first `position` samples, counted over all ranks: sets
  /// the epoch, and for that epoch only, indices() continues the epoch's order from there,
  /// with the same interleaving (rank r takes positions position + r, position + r + R, ...)
  /// and the same padding as a full epoch, so that every rank gets the same number of indices
  /// and the union of what the job visits before and after the resume is the whole epoch. A
  /// later set_epoch to another epoch ends it; set_epoch(epoch) itself keeps it, so the usual
  /// loop `sampler.set_epoch(e); for (batch : loader)` may run unchanged after a resume.
  ///
  /// The position is global, not per rank, so it means the same thing whatever the world
  /// size: a checkpoint saved after s steps of batch B on R ranks resumes at position s * B * R
  /// on any number of ranks, because the epoch's permutation depends only on seed + epoch.
  /// (With the same number of ranks each rank gets exactly the indices it had left.) This is
  /// torchdata's StatefulDistributedSampler idea, counted in global positions. Throws if
  /// `epoch` or `position` is negative.
  void resume_at(int64_t epoch, int64_t position);
  /// The global position the current epoch starts from: 0, or resume_at's position while its
  /// epoch is the current one.
  int64_t start_position() const { return epoch_ == resume_epoch_ ? resume_position_ : 0; }

 private:
  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  bool drop_last_;
  uint64_t seed_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
  int64_t resume_epoch_ = -1;    // the epoch resume_at() applies to (-1: none)
  int64_t resume_position_ = 0;  // where that epoch resumes, in global positions
};

}  // namespace lockstep
