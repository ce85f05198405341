/// \file
/// The random number generator behind rand, randn, dropout and shuffling: explicit and seeded,
/// so that every run (and every rank) can reproduce the same numbers.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

namespace lockstep {

/// A seeded source of random numbers (like torch.Generator). Not thread-safe: share one per
/// thread, or guard it.
class Generator {
 public:
  /// A generator started from `seed`.
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  /// Restarts the sequence from `seed` (torch.manual_seed).
  void manual_seed(uint64_t seed) { engine_.seed(seed); }
  /// Uniform in [0, 1).
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(engine_); }
  /// Standard normal (mean 0, std 1).
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(engine_); }
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(engine_); }
  /// 64 raw random bits.
  uint64_t next() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

/// The process-wide default generator used when no generator is passed (seeded with 0 until
/// manual_seed is called).
Generator& default_generator();

/// Holds the default generator for the caller while the returned lock lives, when `generator`
/// is null (the default is shared: DataParallel's replicas draw dropout masks from several
/// threads at once); an explicit generator belongs to its caller and is not locked.
std::unique_lock<std::mutex> lock_default_generator(const Generator* generator);

/// Seeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace lockstep
