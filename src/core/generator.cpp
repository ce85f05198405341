#include "core/generator.h"

namespace lockstep {

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

std::unique_lock<std::mutex> lock_default_generator(const Generator* generator) {
  static std::mutex mutex;
  return generator != nullptr ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mutex);
}

void manual_seed(uint64_t seed) {
  const auto lock = lock_default_generator(nullptr);
  default_generator().manual_seed(seed);
}

}  // namespace lockstep
