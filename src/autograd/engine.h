/// \file
/// The backward engine: runs a graph of Nodes from one root gradient down to the leaves.
#pragma once

#include <memory>

#include "autograd/node.h"

namespace lockstep {

/// Runs backward from `root` with incoming gradient `grad`. Each node runs once, after every
/// node that feeds it has run (its gradients summed first); ready nodes run latest-created
/// first. Without `retain_graph`, saved tensors are freed as nodes finish.
void run_backward(const std::shared_ptr<Node>& root, const Tensor& grad, bool retain_graph);

}  // namespace lockstep
