// Exercise ch04_ring_all_reduce: the test of the student's ring all-reduce (starter.cpp or the
// file given with FILE=...), run under `mpirun -n 3`: the sum the process group's all_reduce
// computes, the same bits on every rank, for sizes the ranks do not divide, and no MPI
// reduction called to do the work.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "lockstep.h"
#include "mpi/mpi_test_util.h"

namespace exercise {
/// Sums `tensor` (contiguous f32, CPU) over the ranks of `comm` in place, with point-to-point
/// messages around a ring (the student's).
void ring_all_reduce(const lockstep::Tensor& tensor, MPI_Comm comm);
}  // namespace exercise

// MPI's reductions, counted on their way to MPI (its profiling interface, PMPI_*): the ring
// must be built from messages, not from a collective that reduces.
namespace {
int reductions_called = 0;
}  // namespace
int MPI_Allreduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  ++reductions_called;
  return PMPI_Allreduce(send, receive, count, type, op, comm);
}
int MPI_Reduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  ++reductions_called;
  return PMPI_Reduce(send, receive, count, type, op, root, comm);
}
int MPI_Reduce_scatter_block(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  ++reductions_called;
  return PMPI_Reduce_scatter_block(send, receive, count, type, op, comm);
}
int MPI_Reduce_scatter(const void* send, void* receive, const int counts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  ++reductions_called;
  return PMPI_Reduce_scatter(send, receive, counts, type, op, comm);
}
int MPI_Iallreduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  ++reductions_called;
  return PMPI_Iallreduce(send, receive, count, type, op, comm, request);
}
int MPI_Ireduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request* request) {
  ++reductions_called;
  return PMPI_Ireduce(send, receive, count, type, op, root, comm, request);
}
int MPI_Scan(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  ++reductions_called;
  return PMPI_Scan(send, receive, count, type, op, comm);
}

namespace lockstep {
namespace {

// Runs the student's ring on a copy of `input` and the process group's all_reduce on another;
// returns {ring's result, all_reduce's result}.
std::pair<Tensor, Tensor> ring_and_reference(const Tensor& input) {
  const Tensor ring = input.clone(), reference = input.clone();
  const int reductions_before = reductions_called;
  exercise::ring_all_reduce(ring, MPI_COMM_WORLD);
  EXPECT_EQ(reductions_called, reductions_before) << "ring_all_reduce called an MPI reduction: use point-to-point messages";
  test::group().all_reduce(reference);
  return {ring, reference};
}

// Whole numbers are summed exactly in any order, so the ring must match all_reduce exactly:
// rank r holds (r + 1) * (i + 1) at element i; 7 elements on 3 ranks do not divide.
TEST(RingAllReduce, SumsWholeNumbersExactly) {
  const int world = test::group().size(), rank = test::group().rank();
  std::vector<double> values;
  for (int i = 0; i < 7; ++i) values.push_back((rank + 1.0) * (i + 1.0));
  const auto [ring, reference] = ring_and_reference(from_vector(values, {7}));
  const std::vector<float> sums = ring.to_vector<float>();
  EXPECT_EQ(sums, reference.to_vector<float>());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(sums[i], world * (world + 1) / 2 * (i + 1)) << "element " << i;
}

// Random values: the ring adds in another order than MPI does, so the sums agree to rounding;
// but every rank must hold the same bits (each chunk is summed once, then copied around).
TEST(RingAllReduce, MatchesAllReduceOnRandomValues) {
  Generator g(100 + static_cast<uint64_t>(test::group().rank()));
  const auto [ring, reference] = ring_and_reference(randn({1001}, {}, &g));
  const std::vector<float> a = ring.to_vector<float>(), b = reference.to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << "element " << i;
  test::expect_same_on_every_rank(ring, "the ring's result");
}

// Fewer elements than ranks: some chunks are empty, and the ring must still deliver.
TEST(RingAllReduce, HandlesFewerElementsThanRanks) {
  const auto [ring, reference] = ring_and_reference(full({2}, test::group().rank() + 1.0));
  EXPECT_EQ(ring.to_vector<float>(), reference.to_vector<float>());
}

}  // namespace
}  // namespace lockstep
