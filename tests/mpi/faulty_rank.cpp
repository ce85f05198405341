// A job in which rank 1 misbehaves in one of the ways that can hang a data-parallel job
// silently, to check that every one ends the job with a message naming the cause:
//   --fault freeze     rank 1 stops itself (SIGSTOP) before the second all-reduce;
//   --fault busy       rank 1 computes (sleeps) instead of joining the second all-reduce;
//   --fault mismatch   rank 1 calls a barrier, from another caller, where rank 0 all-reduces
//                      (with LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL the fingerprints name it);
//   --fault none       nobody misbehaves (the job succeeds).
// Rank 0 always runs: all_reduce "first" (4 floats), all_reduce "second" (1,000 floats).
// tests/mpi/expect_job_fails.cmake runs it and checks the message and the time to the end.
#include <csignal>
#include <chrono>
#include <string>
#include <thread>

#include "common/program.h"
#include "lockstep.h"

int main(int argc, char** argv) {
  CLI::App app("A job with a misbehaving rank 1");
  std::string fault = "none";
  double timeout = 5.0;
  app.add_option("--fault", fault, "freeze, busy, mismatch or none")->check(CLI::IsMember({"freeze", "busy", "mismatch", "none"}));
  app.add_option("--timeout", timeout, "the collective timeout, seconds");
  return lockstep::run_program(app, argc, argv, [&] {
    using namespace lockstep;
    init_process_group("mpi", Device::cpu(), ProcessGroupOptions().timeout(timeout));
    ProcessGroup& group = default_process_group();
    {
      CollectiveCaller caller("first");
      group.all_reduce(ones({4}));
    }
    const bool misbehave = group.rank() == 1 && fault != "none";
    if (misbehave && fault == "freeze") std::raise(SIGSTOP);
    if (misbehave && fault == "busy") std::this_thread::sleep_for(std::chrono::seconds(600));
    if (misbehave && fault == "mismatch") {
      CollectiveCaller caller("other");
      group.barrier();
    } else {
      CollectiveCaller caller("second");
      group.all_reduce(ones({1000}));
    }
    log_rank("finished");
    destroy_process_group();
    return 0;
  });
}
