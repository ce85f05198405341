// Exercise ch04_ring_all_reduce: the reference solution.
#include <mpi.h>

#include <vector>

#include "lockstep.h"

namespace exercise {

using namespace lockstep;

void ring_all_reduce(const Tensor& tensor, MPI_Comm comm) {
  int rank = 0, n = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  float* data = tensor.data_ptr<float>();
  const int64_t numel = tensor.numel();
  auto begin = [&](int chunk) { return chunk * numel / n; };
  auto count = [&](int chunk) { return static_cast<int>(begin(chunk + 1) - begin(chunk)); };
  auto mod = [n](int k) { return ((k % n) + n) % n; };
  const int right = mod(rank + 1), left = mod(rank - 1);
  std::vector<float> incoming(static_cast<size_t>(numel / n + 1));

  // Reduce-scatter: after step s, chunk (rank - s - 1) holds the sum of s + 2 ranks' values.
  for (int s = 0; s < n - 1; ++s) {
    const int send = mod(rank - s), receive = mod(rank - s - 1);
    MPI_Sendrecv(data + begin(send), count(send), MPI_FLOAT, right, 0, incoming.data(), count(receive), MPI_FLOAT, left,
                 0, comm, MPI_STATUS_IGNORE);
    for (int i = 0; i < count(receive); ++i) data[begin(receive) + i] += incoming[static_cast<size_t>(i)];
  }
  // All-gather: each complete chunk travels once around the ring.
  for (int s = 0; s < n - 1; ++s) {
    const int send = mod(rank + 1 - s), receive = mod(rank - s);
    MPI_Sendrecv(data + begin(send), count(send), MPI_FLOAT, right, 1, data + begin(receive), count(receive), MPI_FLOAT,
                 left, 1, comm, MPI_STATUS_IGNORE);
  }
  increment_version(tensor);
}

}  // namespace exercise
