#include "data/distributed_sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace lockstep {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                                       const DistributedSamplerOptions& options)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(options.shuffle()),
      drop_last_(options.drop_last()),
      seed_(options.seed()) {
  LOCKSTEP_CHECK(num_replicas >= 1, "DistributedSampler: expected num_replicas >= 1 (the number of processes ",
                 "sharing the dataset, i.e. the world size), got ", num_replicas);
  LOCKSTEP_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: expected a rank in [0, num_replicas) = [0, ",
                 num_replicas, "), got rank ", rank, "; ranks count from 0");
  LOCKSTEP_CHECK(dataset_size >= 0, "DistributedSampler: expected a dataset size >= 0, got ", dataset_size);
  // Without drop_last the order is padded up to a multiple of num_replicas, so round up;
  // with it the uneven tail is cut off, so round down.
  num_samples_ = options.drop_last() ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

//! [index rule]
std::vector<int64_t> DistributedSampler::indices() {
  std::vector<int64_t> order;
  if (shuffle_) {
    // Every rank seeds its own generator with the same seed + epoch, so all ranks draw the same
    // permutation without communicating, and each epoch draws a different one.
    Generator generator(seed_ + static_cast<uint64_t>(epoch_));
    order = randperm(dataset_size_, generator);
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), int64_t(0));
  }
  // Rank r takes positions r, r + R, r + 2R, ... of the order. Positions past the end wrap
  // around to the start: that is PyTorch's padding (the order followed by its own first
  // elements, repeated as often as needed). With drop_last no position reaches the end.
  // A resumed epoch starts at start_position() instead of 0 (see resume_at).
  const int64_t start = start_position();
  const int64_t count = size();
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    const int64_t position = start + rank_ + k * num_replicas_;
    shard.push_back(order[static_cast<size_t>(position % dataset_size_)]);
  }
  return shard;
}
//! [index rule]

int64_t DistributedSampler::size() const {
  const int64_t start = start_position();
  if (start == 0) return num_samples_;
  // What is left of the epoch's total_size() positions, shared out evenly: rounded up (padding
  // by wrapping around the order, as a full epoch does) or, with drop_last, down.
  const int64_t left = std::max<int64_t>(0, total_size() - start);
  return drop_last_ ? left / num_replicas_ : (left + num_replicas_ - 1) / num_replicas_;
}

void DistributedSampler::resume_at(int64_t epoch, int64_t position) {
  LOCKSTEP_CHECK(position >= 0, "DistributedSampler::resume_at: expected a position >= 0, got ", position);
  set_epoch(epoch);
  resume_epoch_ = epoch;
  resume_position_ = position;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  LOCKSTEP_CHECK(epoch >= 0, "DistributedSampler: expected an epoch >= 0, got ", epoch);
  epoch_ = epoch;
}

}  // namespace lockstep
