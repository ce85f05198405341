// The indices DistributedSampler gives each rank in each epoch, as CSV for the sampler figure
// (tools/figures/sampler_shards.py): the library's own sampler, not a copy of its rules.
// Run: sampler_indices DATASET_SIZE RANKS EPOCHS [SEED]  ->  epoch,rank,position,index
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/distributed_sampler.h"

namespace {

// The whole number `text` names, at least `minimum`; anything else (a word, a fraction, a
// sign too many) is refused with a sentence naming the argument.
int64_t whole_number(const char* name, const std::string& text, int64_t minimum) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LOCKSTEP_CHECK(used == text.size() && used > 0 && value >= minimum, name, ": expected a whole number of ", minimum,
                 " or more, got '", text, "'");
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s DATASET_SIZE RANKS EPOCHS [SEED]\n", argv[0]);
    return 1;
  }
  int64_t dataset_size = 0, ranks = 0, epochs = 0;
  uint64_t seed = 0;
  try {
    dataset_size = whole_number("DATASET_SIZE", argv[1], 1);
    ranks = whole_number("RANKS", argv[2], 1);
    epochs = whole_number("EPOCHS", argv[3], 1);
    seed = argc == 5 ? static_cast<uint64_t>(whole_number("SEED", argv[4], 0)) : 0;
  } catch (const lockstep::Error& error) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], error.what());
    return 1;
  }
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
