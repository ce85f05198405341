// Bugs planted on purpose, one per argument, to prove that a sanitizer build catches what it is
// meant to catch and stops on it (tools/sanitizers/CMakeLists.txt runs each as a test):
//   heap-overflow       reads one element past a heap array         (AddressSanitizer)
//   signed-overflow     adds 1 to the largest int                    (UndefinedBehaviorSanitizer)
//   race                two threads write one int without a lock     (ThreadSanitizer)
//   openmp              parallel loops, each reading what other threads wrote in the loop before,
//                       correctly synchronised by OpenMP's barriers: ThreadSanitizer must stay
//                       silent, which it does only when it is told how OpenMP synchronises
// The planted bugs must end the process with the sanitizer's report; "openmp" must succeed.
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace {

// Values the compiler cannot see through, so that it cannot fold the bugs away.
volatile int g_index = 8;
volatile int g_largest = std::numeric_limits<int>::max();

int heap_overflow() {
  std::vector<int> values(8, 1);
  const int* data = values.data();
  return data[g_index];  // one past the end
}

int signed_overflow() {
  const int largest = g_largest;
  return largest + 1;  // undefined for int
}

int race() {
  int counter = 0;
  std::thread a([&counter] { counter += 1; });
  std::thread b([&counter] { counter += 1; });
  a.join();
  b.join();
  return counter;
}

int openmp() {
  std::vector<double> values(1 << 12);
  double total = 0.0;
  for (int round = 0; round < 2; ++round) {
#pragma omp parallel for
    for (int i = 0; i < static_cast<int>(values.size()); ++i) values[i] = i * 0.5 + round;
    // Read in reverse, so that each thread reads what another thread wrote.
    const int n = static_cast<int>(values.size());
#pragma omp parallel for reduction(+ : total)
    for (int i = 0; i < n; ++i) total += values[n - 1 - i];
  }
  return total > 0.0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* bug = argc == 2 ? argv[1] : "";
  if (std::strcmp(bug, "heap-overflow") == 0) return heap_overflow();
  if (std::strcmp(bug, "signed-overflow") == 0) return signed_overflow();
  if (std::strcmp(bug, "race") == 0) return race();
  if (std::strcmp(bug, "openmp") == 0) return openmp();
  std::fprintf(stderr, "usage: planted_bugs heap-overflow|signed-overflow|race|openmp\n");
  return 2;
}
