// A job in which rank 1 misbehaves in one of the ways that can hang a data-parallel job
// silently, to check that every one ends the job with a message naming the cause:
//   --fault freeze     rank 1 stops itself (SIGSTOP) before the second all-reduce;
//   --fault busy       rank 1 computes (sleeps) instead of joining the second all-reduce;
//   --fault mismatch   rank 1 calls a barrier, from another caller, where rank 0 all-reduces
//                      (with LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL the fingerprints name it);
//   --fault fsdp-freeze  both ranks train the MLP under FSDP; rank 1 stops itself (SIGSTOP)
//                      after the first step, so rank 0 waits in the second step's first
//                      all-gather of parameters;
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
  app.add_option("--fault", fault, "freeze, busy, mismatch or none")->check(CLI::IsMember({"freeze", "busy", "mismatch", "fsdp-freeze", "none"}));
  app.add_option("--timeout", timeout, "the collective timeout, seconds");
  return lockstep::run_program(app, argc, argv, [&] {
    using namespace lockstep;
    init_process_group("mpi", Device::cpu(), ProcessGroupOptions().timeout(timeout));
    ProcessGroup& group = default_process_group();
    {
      CollectiveCaller caller("first");
      group.all_reduce(ones({4}));
    }
    if (fault == "fsdp-freeze") {
      // Each Linear a unit, then the root; two steps, rank 1 frozen between them.
      const std::shared_ptr<Module> model = make_model("mlp");
      for (const auto& [name, child] : model->named_children()) {
        if (child->name() == "Linear") fully_shard(child);
      }
      const std::shared_ptr<FSDPModule> root = fully_shard(model);
      SGD opt(root->parameters(), SGDOptions(0.1));
      for (int step = 0; step < 2; ++step) {
        if (step == 1 && group.rank() == 1) std::raise(SIGSTOP);
        opt.zero_grad();
        cross_entropy((*model)(ones({2, 1, 28, 28})), from_vector(std::vector<int64_t>{1, 2}, {2})).backward();
        opt.step();
      }
      log_rank("finished");
      destroy_process_group();
      return 0;
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
