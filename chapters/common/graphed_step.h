/// \file
/// `--cuda-graph`: a training step (forward, loss, backward, optimiser step) recorded once as a
/// CUDA graph (core/cuda/graph.h) and replayed for every batch, as PyTorch's whole-network
/// capture does it (`torch.cuda.graph` around the step, static inputs copied in before each
/// `replay()`):
/// 1. a few steps run eagerly first: they create what a step makes only once (the optimiser's
///    momentum buffers, cuBLAS's workspace), which must exist before the capture;
/// 2. the next batch's step is captured, with the batch in tensors kept for the graph;
/// 3. from then on each batch is copied into those tensors and the graph replayed.
/// A batch of another shape (an epoch's smaller last batch) runs eagerly: a replay repeats the
/// recorded shapes. The parameters, their gradients and the optimiser's state are updated in
/// place by eager steps and replays alike, so the two mix freely.
#pragma once

#include <functional>

#include "core/cuda/graph.h"
#include "tensor/tensor.h"

namespace lockstep {

/// A training step run eagerly for its first batches, then replayed from a CUDA graph.
class GraphedStep {
 public:
  /// The step: given a batch's inputs and targets (on the GPU), it runs forward, loss,
  /// backward and the optimiser step, and returns the loss (a scalar on the GPU).
  using Step = std::function<Tensor(const Tensor& inputs, const Tensor& targets)>;

  /// Captures `step` after `eager_steps` eager runs of it (at least 1).
  explicit GraphedStep(Step step, int eager_steps = 3);

  /// Runs the step on this batch (tensors on the GPU) and returns its loss on the GPU; a loss
  /// from a replay is overwritten by the next replay, so read or add it before then.
  Tensor operator()(const Tensor& inputs, const Tensor& targets);

  /// How many steps the graph has replayed so far.
  int64_t replays() const { return replays_; }

 private:
  Step step_;
  int eager_left_;
  Tensor static_inputs_, static_targets_;  // the batch, where the graph reads it
  Tensor static_loss_;                     // the loss, where the graph writes it
  cuda::CUDAGraph graph_;
  int64_t replays_ = 0;
};

}  // namespace lockstep
