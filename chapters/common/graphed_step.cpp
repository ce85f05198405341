#include "common/graphed_step.h"

#include "core/error.h"

namespace lockstep {

GraphedStep::GraphedStep(Step step, int eager_steps) : step_(std::move(step)), eager_left_(eager_steps) {
  LOCKSTEP_CHECK(eager_steps >= 1, "GraphedStep: at least one eager step must run before the capture, got ",
                 eager_steps);
}

Tensor GraphedStep::operator()(const Tensor& inputs, const Tensor& targets) {
  LOCKSTEP_CHECK(inputs.device().is_cuda(), "--cuda-graph: a CUDA graph replays GPU work; the batch is on ",
                 inputs.device());
  // The graph's tensors take the first batch's shapes; a batch of other shapes runs eagerly.
  if (!static_inputs_.defined()) {
    static_inputs_ = empty_like(inputs);
    static_targets_ = empty_like(targets);
  }
  if (inputs.shape() != static_inputs_.shape() || targets.shape() != static_targets_.shape()) {
    return step_(inputs, targets);
  }
  static_inputs_.copy_(inputs);
  static_targets_.copy_(targets);
  if (eager_left_ > 0) {
    --eager_left_;
    return step_(static_inputs_, static_targets_);
  }
  // Capturing records the step without running it: the first replay runs it for this batch.
  if (!graph_.captured()) {
    graph_.capture(inputs.device(), [&] { static_loss_ = step_(static_inputs_, static_targets_); });
  }
  graph_.replay();
  ++replays_;
  return static_loss_;
}

}  // namespace lockstep
