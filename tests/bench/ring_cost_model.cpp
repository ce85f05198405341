/// \file
/// The link's two numbers for tests/bench/ring_cost_model.sh: how long a raw MPI_Allreduce of
/// f32 sums takes at sizes from one float to a few MiB, on the job's ranks and network (there:
/// two lab "nodes" joined by a rate-limited bridge). The smallest size gives the cost model's
/// alpha (the fixed cost of one all-reduce); the slope over the large sizes gives the bandwidth
/// the all-reduce really gets. Started under mpirun:
///
///     mpirun -n 2 ./build/tests/ring_cost_model [REPS]
///
/// Prints one line per size, `allreduce bytes=B seconds=S`, S the median over REPS calls (more
/// for small sizes) of the slowest rank's time. Each call follows a barrier, so that every call
/// starts with the ranks together and empty links (as DDP's all-reduces of one step do after
/// the compute between steps) rather than in a pipeline of back-to-back calls.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 20;
  const std::vector<long> sizes = {4, 64, 1024, 16384, 65536, 262144, 524288, 1048576, 2097152, 4194304};
  std::vector<float> buffer(static_cast<size_t>(sizes.back() / 4), 1.0f);
  for (const long bytes : sizes) {
    const int count = static_cast<int>(bytes / 4);
    // Small calls are cheap and noisy: time more of them.
    const int calls = bytes <= 65536 ? reps * 10 : reps;
    std::vector<double> times;
    for (int i = -3; i < calls; ++i) {  // 3 warm-up calls
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double seconds = MPI_Wtime() - start;
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= 0) times.push_back(seconds);
      std::fill(buffer.begin(), buffer.begin() + count, 1.0f);  // keep the sums finite
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    if (rank == 0) std::printf("allreduce bytes=%ld seconds=%.9f\n", bytes, times[times.size() / 2]);
  }
  MPI_Finalize();
  return 0;
}
