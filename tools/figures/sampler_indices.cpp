// The indices DistributedSampler gives each rank in each epoch, as CSV for the sampler figure
// (tools/figures/sampler_shards.py): the library's own sampler, not a copy of its rules.
// Run: sampler_indices DATASET_SIZE RANKS EPOCHS [SEED]  ->  epoch,rank,position,index
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "data/distributed_sampler.h"

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s DATASET_SIZE RANKS EPOCHS [SEED]\n", argv[0]);
    return 1;
  }
  const int64_t dataset_size = std::atoll(argv[1]), ranks = std::atoll(argv[2]), epochs = std::atoll(argv[3]);
  const uint64_t seed = argc == 5 ? std::strtoull(argv[4], nullptr, 10) : 0;
  std::printf("epoch,rank,position,index\n");
  for (int64_t rank = 0; rank < ranks; ++rank) {
    lockstep::DistributedSampler sampler(dataset_size, ranks, rank, lockstep::DistributedSamplerOptions().seed(seed));
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      sampler.set_epoch(epoch);  // as chapter 4 does before each epoch
      const std::vector<int64_t> indices = sampler.indices();
      for (size_t position = 0; position < indices.size(); ++position) {
        std::printf("%lld,%lld,%zu,%lld\n", static_cast<long long>(epoch), static_cast<long long>(rank), position,
                    static_cast<long long>(indices[position]));
      }
    }
  }
  return 0;
}
