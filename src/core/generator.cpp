#include "core/generator.h"

#include <cctype>
#include <sstream>

#include "core/error.h"

namespace lockstep {

namespace {

Generator& process_generator() {
  static Generator generator(0);
  return generator;
}

// The calling thread's own default generator, if a ThreadGeneratorGuard set one.
thread_local Generator* thread_generator = nullptr;

}  // namespace

std::string Generator::get_state() const {
  std::ostringstream out;
  out << engine_;  // the standard's text form: state words and position, space-separated
  return out.str();
}

void Generator::set_state(const std::string& state) {
  // The text holds exactly state_size words and one position. Counting them first means a
  // text from another engine (or truncated, or padded with junk) is refused with a sentence
  // instead of leaving the stream's failure bit as the only sign.
  constexpr size_t kNumbers = std::mt19937_64::state_size + 1;
  std::istringstream words(state);
  size_t count = 0;
  for (std::string word; words >> word; ++count) {
    for (char c : word)
      LOCKSTEP_CHECK(std::isdigit(static_cast<unsigned char>(c)), "Generator::set_state: expected ", kNumbers,
                     " whole numbers separated by spaces (the text get_state() returns), but found '", word, "'");
  }
  LOCKSTEP_CHECK(count == kNumbers, "Generator::set_state: expected ", kNumbers,
                 " numbers (the text get_state() returns), got ", count);
  std::istringstream in(state);
  std::mt19937_64 engine;
  in >> engine;
  LOCKSTEP_CHECK(!in.fail(), "Generator::set_state: a number of the state is out of range for a 64-bit word");
  engine_ = engine;
}

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
