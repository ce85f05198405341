/// \file
/// The backward engine: runs a graph of Nodes from one root gradient down to the leaves.
#pragma once

#include <functional>
#include <memory>

#include "tensor/autograd/node.h"

namespace lockstep {

/// Runs backward from `root` with incoming gradient `grad`. Each node runs once, after every
/// node that feeds it has run (its gradients summed first); of the ready nodes, AccumulateGrad
/// runs first, then the latest-created. Without `retain_graph`, saved tensors are freed as
/// nodes finish.
void run_backward(const std::shared_ptr<Node>& root, const Tensor& grad, bool retain_graph);

/// Queues `callback` to run once the backward pass now running on this thread has processed
/// every node, before backward() returns (PyTorch's `Variable._execution_engine.queue_callback`).
/// DistributedDataParallel uses it to wait for its last all-reduce. Callbacks run in the order
/// they were queued, with gradient recording off; calling this outside a backward pass is an
/// error. If the backward pass throws, its queued callbacks are dropped unrun.
void queue_backward_callback(std::function<void()> callback);

}  // namespace lockstep
