#include "data/sampler.h"

#include <numeric>
#include <utility>

#include "core/error.h"

namespace lockstep {

std::vector<int64_t> randperm(int64_t n, Generator& generator) {
  LOCKSTEP_CHECK(n >= 0, "randperm: expected n >= 0, got ", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  // Fisher-Yates: position i takes a uniformly chosen element of those not yet placed (0..i).
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(generator.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  LOCKSTEP_CHECK(n >= 0, "SequentialSampler: expected a dataset size >= 0, got ", n);
}

std::vector<int64_t> SequentialSampler::indices() {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), int64_t(0));
  return order;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), generator_(seed) {
  LOCKSTEP_CHECK(n >= 0, "RandomSampler: expected a dataset size >= 0, got ", n);
}

std::vector<int64_t> RandomSampler::indices() { return randperm(n_, generator_); }

}  // namespace lockstep
