#include "core/threads.h"

#include "core/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace lockstep {

void set_num_threads(int threads) {
  LOCKSTEP_CHECK(threads >= 1, "set_num_threads: expected at least 1 thread, got ", threads);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
}

int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace lockstep
