/// \file
/// Samplers (torch.utils.data.Sampler): the order in which a DataLoader visits the samples of
/// a dataset, one epoch at a time. DistributedSampler (chapter 4) derives from Sampler too.
#pragma once

#include <cstdint>
#include <vector>

#include "core/generator.h"

namespace lockstep {

/// Decides which dataset indices one epoch visits, and in what order.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The indices of the next epoch, in visiting order (iter(sampler) in PyTorch). Called once
  /// per epoch by the DataLoader, on the thread that iterates it.
  virtual std::vector<int64_t> indices() = 0;
  /// How many indices one epoch yields (len(sampler)).
  virtual int64_t size() const = 0;
  /// Tells the sampler which epoch comes next. Samplers whose order depends on the epoch
  /// (DistributedSampler) use it; the others ignore it.
  virtual void set_epoch(int64_t epoch) { (void)epoch; }
};

/// Visits 0, 1, ..., n-1 every epoch (torch.utils.data.SequentialSampler).
class SequentialSampler : public Sampler {
 public:
  /// A sampler over a dataset of `n` samples.
  explicit SequentialSampler(int64_t n);
  /// 0, 1, ..., n-1.
  std::vector<int64_t> indices() override;
  /// n.
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

/// Visits a new random permutation of 0..n-1 every epoch (torch.utils.data.RandomSampler with
/// a seeded generator). The generator is seeded once, so the epochs differ from each other
/// while the whole sequence of epochs is the same on every run with the same seed.
///
/// \see @ref chapter2 "Chapter 2: Training on one device", which introduces it.
class RandomSampler : public Sampler {
 public:
  /// A sampler over a dataset of `n` samples whose generator starts from `seed`.
  RandomSampler(int64_t n, uint64_t seed);
  /// The next permutation from the sampler's generator.
  std::vector<int64_t> indices() override;
  /// n.
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  Generator generator_;
};

/// A uniformly random permutation of 0..n-1 drawn from `generator` (torch.randperm), by a
/// Fisher-Yates shuffle.
std::vector<int64_t> randperm(int64_t n, Generator& generator);

}  // namespace lockstep
