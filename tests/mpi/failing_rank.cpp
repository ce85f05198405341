// A job in which one rank fails: rank 1 throws while rank 0 waits in an all-reduce that rank 1
// will never join. The test (tests/mpi/expect_job_fails.cmake) expects the whole job to end
// with a non-zero status within 60 s, instead of rank 0 waiting forever.
#include <iostream>

#include "common/program.h"
#include "lockstep.h"

int main(int argc, char** argv) {
  CLI::App app("A job with a failing rank");
  return lockstep::run_program(app, argc, argv, [] {
    lockstep::init_process_group("mpi");
    lockstep::ProcessGroup& group = lockstep::default_process_group();
    if (group.rank() == 1) throw lockstep::Error("rank 1 fails on purpose");
    group.all_reduce(lockstep::ones({4}));
    lockstep::destroy_process_group();
    return 0;
  });
}
