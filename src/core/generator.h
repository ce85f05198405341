/// \file
/// The random number generator behind rand, randn, dropout and shuffling: explicit and seeded,
/// so that every run (and every rank) can reproduce the same numbers.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>

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

  /// The generator's whole state as text (torch.Generator.get_state): the 312 words of the
  /// Mersenne Twister and its position, as decimal numbers separated by spaces, the form the
  /// C++ standard library defines for std::mt19937_64 (so it is exact and the same with every
  /// standard library). set_state() of this text makes a generator that draws exactly the
  /// numbers this one would draw next. Every draw above depends on this state alone (a
  /// distribution object is made afresh for each draw and keeps nothing), which is what lets a
  /// checkpoint resume a run's random numbers bit for bit.
  std::string get_state() const;
  /// Restores a state that get_state() returned (torch.Generator.set_state). Throws
  /// lockstep::Error, leaving the generator unchanged, when `state` is not such a text (wrong
  /// count of numbers, a word that is not a number, extra characters).
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

/// The generator used when none is passed: the process-wide one (seeded with 0 until
/// manual_seed is called), or, on a thread inside a ThreadGeneratorGuard, that guard's.
Generator& default_generator();

/// Makes `generator` the calling thread's default generator while the guard lives.
/// DataParallel gives each replica's thread its own generator, seeded from the process-wide
/// one, so that dropout masks follow from the seed and not from which thread draws first.
class ThreadGeneratorGuard {
 public:
  /// `generator` must outlive the guard.
  explicit ThreadGeneratorGuard(Generator& generator);
  /// Restores the thread's previous default generator.
  ~ThreadGeneratorGuard();
  ThreadGeneratorGuard(const ThreadGeneratorGuard&) = delete;             ///< Not copyable.
  ThreadGeneratorGuard& operator=(const ThreadGeneratorGuard&) = delete;  ///< Not copyable.

 private:
  Generator* previous_;
};

/// Locks the process-wide generator, which threads share, while the returned lock lives: when
/// `generator` is that generator itself, or when it is null and the calling thread has no
/// generator of its own (then the default generator is the process-wide one). Any other
/// generator belongs to its caller and is not locked.
std::unique_lock<std::mutex> lock_default_generator(const Generator* generator);

/// Seeds the process-wide generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace lockstep
