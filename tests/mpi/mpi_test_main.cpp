// The main of the MPI tests, run by CTest as `mpirun -n 2 mpi_tests` and `mpirun -n 3 mpi_tests`.
// Every rank runs every test: the tests call collectives, which need all ranks. Only rank 0
// prints gtest's report; a rank that fails says so on stderr with its rank. The exit status is
// the same on all ranks: failing if any rank failed.
#include <gtest/gtest.h>

#include <iostream>

#include "lockstep.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  lockstep::init_process_group("mpi");
  lockstep::ProcessGroup& group = lockstep::default_process_group();
  // One thread per rank: the ranks share this machine's cores.
  lockstep::set_num_threads(1);
  if (group.rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  if (failed) std::cerr << lockstep::rank_prefix() << "some tests failed on this rank\n";
  // Agree on one exit status.
  const lockstep::Tensor status = lockstep::full({1}, failed, lockstep::TensorOptions().dtype(lockstep::DType::i32));
  group.all_reduce(status, lockstep::ReduceOp::Max);
  lockstep::destroy_process_group();
  return status.item<int32_t>();
}
