/// \file
/// replicate (torch.nn.parallel.replicate): one copy of a module per device, made again at
/// every step from the original's current weights. The copies are connected to the original
/// through autograd, so a backward pass through any replica adds its gradients into the
/// original parameters' grad: nothing else has to reduce them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "nn/module.h"

namespace lockstep {

/// Time spent sending replicas' gradients back to the original parameters' device during
/// backward (the "reduce" of DataParallel's step), summed by the nodes that do it. Gradients
/// already on that device are not sent, and not timed: adding them up is part of backward.
struct GradientReturnClock {
  std::atomic<int64_t> nanoseconds{0};  ///< Total so far.
  bool synchronize = false;             ///< Wait for the work queued before each copy, and then for the copy, so the clock times the copy alone.
};

/// `count` new modules shaped like `module`, built with Module::clone_structure(): the shells
/// that fill_replicas() fills every step. Throws when a clone differs from the module in a
/// class, a parameter or a buffer (a class that does not override clone_structure()). Building them draws initial weights that are thrown
/// away, so the default generator is restored afterwards: wrapping a model in DataParallel does
/// not change the random numbers the training draws.
std::vector<std::shared_ptr<Module>> make_replica_shells(const Module& module, size_t count);

/// Makes replicas[i] a copy of `module` on devices[i] for this step (replicas and devices of the
/// same length, at most as many as were built):
/// - parameters are broadcast through autograd: replica i's parameter is a non-leaf tensor on
///   devices[i] whose grad_fn (BroadcastBackward) sends its gradient back to the original
///   parameter, where autograd adds up the replicas' gradients. Replica 0, when it is on the
///   module's own device, shares the original's memory instead of copying it;
/// - buffers are copied without autograd; replica 0 on the module's device shares them, so its
///   BatchNorm running statistics are the only ones that survive the step;
/// - each module of a replica gets the training mode of its original.
/// `clock`, when given, times the gradients' way back during backward.
void fill_replicas(const Module& module, const std::vector<std::shared_ptr<Module>>& replicas,
                   const std::vector<Device>& devices, const std::shared_ptr<GradientReturnClock>& clock = nullptr);

/// New replicas of `module`, one per device (make_replica_shells + fill_replicas), like
/// torch.nn.parallel.replicate.
std::vector<std::shared_ptr<Module>> replicate(const Module& module, const std::vector<Device>& devices);

}  // namespace lockstep
