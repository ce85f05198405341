#include "common/fault_lab.h"

#include <csignal>
#include <utility>

#include "common/program.h"
#include "core/error.h"
#include "distributed/launch.h"
#include "nn/linear.h"

namespace lockstep {

namespace {
// A model with a layer that its forward never calls: DDP waits for that layer's gradient, which
// never comes, unless find_unused_parameters is on.
class WithUnusedLayer : public Module {
 public:
  explicit WithUnusedLayer(std::shared_ptr<Module> model) : model_(std::move(model)) {
    register_module("model", model_);
    register_module("unused", std::make_shared<Linear>(4, 4));
  }
  Tensor forward(const Tensor& input) override { return (*model_)(input); }

 private:
  std::shared_ptr<Module> model_;
};
}  // namespace

void add_fault_flags(CLI::App& app, FaultFlags& flags) {
  app.add_option("--fault", flags.fault,
                 "make one rank misbehave, to see what happens (chapter 4, section 12): none, freeze, kill, "
                 "skip-backward, uneven, seed or unused-parameter")
      ->check(CLI::IsMember({"none", "freeze", "kill", "skip-backward", "uneven", "seed", "unused-parameter"}));
  app.add_option("--fault-rank", flags.rank, "the rank that misbehaves")->check(non_negative_number());
  app.add_option("--fault-step", flags.step, "the step of each epoch (from 1) at which it does")
      ->check(positive_number());
}

FaultLab::FaultLab(const FaultFlags& flags, int rank, int world_size, int64_t max_steps) : flags_(flags), rank_(rank) {
  LOCKSTEP_CHECK(flags.fault == "none" || flags.rank < world_size, "--fault-rank ", flags.rank,
                 ": the job has ranks 0 to ", world_size - 1, " (start more ranks with mpirun -n, or choose another)");
  LOCKSTEP_CHECK(flags.fault != "uneven" || max_steps == 0, "--fault uneven runs whole epochs: with --max-steps the "
                 "rank that ran out of batches would count fewer steps and start another epoch alone (leave out "
                 "--max-steps; --model mlp --epochs 1 is quick)");
  if (strikes("freeze")) log_rank("fault lab: this rank will stop itself (SIGSTOP) before step " + std::to_string(flags.step));
  if (strikes("kill")) log_rank("fault lab: this rank will die (SIGKILL) before step " + std::to_string(flags.step));
  if (strikes("skip-backward")) log_rank("fault lab: this rank will skip backward at step " + std::to_string(flags.step));
  if (strikes("uneven")) log_rank("fault lab: this rank will run out of batches before step " + std::to_string(flags.step));
  if (strikes("seed")) log_rank("fault lab: this rank uses --seed + 1");
  if (flags.fault == "unused-parameter") log_rank("fault lab: the model has a layer its forward never uses");
}

uint64_t FaultLab::seed(uint64_t seed) const { return strikes("seed") ? seed + 1 : seed; }

std::shared_ptr<Module> FaultLab::model(std::shared_ptr<Module> model) const {
  if (flags_.fault != "unused-parameter") return model;
  return std::make_shared<WithUnusedLayer>(std::move(model));
}

bool FaultLab::runs_out_before(int64_t step) const {
  if (step != flags_.step) return strikes("uneven") && step > flags_.step;
  if (strikes("freeze")) {
    log_rank("fault lab: stopping (SIGSTOP) before step " + std::to_string(step));
    std::raise(SIGSTOP);
  }
  if (strikes("kill")) {
    log_rank("fault lab: dying (SIGKILL) before step " + std::to_string(step));
    std::raise(SIGKILL);
  }
  return strikes("uneven");
}

bool FaultLab::skips_backward(int64_t step) const { return strikes("skip-backward") && step == flags_.step; }

bool FaultLab::unpairs_collectives() const { return flags_.fault == "skip-backward"; }

}  // namespace lockstep
