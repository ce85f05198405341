#include "core/generator.h"

namespace lockstep {

namespace {

Generator& process_generator() {
  static Generator generator(0);
  return generator;
}

// The calling thread's own default generator, if a ThreadGeneratorGuard set one.
thread_local Generator* thread_generator = nullptr;

}  // namespace

Generator& default_generator() { return thread_generator != nullptr ? *thread_generator : process_generator(); }

ThreadGeneratorGuard::ThreadGeneratorGuard(Generator& generator) : previous_(thread_generator) {
  thread_generator = &generator;
}

ThreadGeneratorGuard::~ThreadGeneratorGuard() { thread_generator = previous_; }

std::unique_lock<std::mutex> lock_default_generator(const Generator* generator) {
  static std::mutex mutex;
  const bool shared = (generator == nullptr && thread_generator == nullptr) || generator == &process_generator();
  return shared ? std::unique_lock<std::mutex>(mutex) : std::unique_lock<std::mutex>();
}

void manual_seed(uint64_t seed) {
  const auto lock = lock_default_generator(&process_generator());
  process_generator().manual_seed(seed);
}

}  // namespace lockstep
