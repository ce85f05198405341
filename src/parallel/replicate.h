/// \file
/// replicate (torch.nn.parallel.replicate): one copy of a module per device, made again at
/// every step from the original's current weights. The copies are connected to the original
/// through autograd, so a backward pass through any replica adds its gradients into the
/// original parameters' grad: nothing else has to reduce them.
#pragma once

#include <memory>
#include <vector>

#include "core/device.h"
#include "nn/module.h"

namespace lockstep {

/// `count` new modules shaped like `module`, built with Module::clone_structure(): the shells
/// that fill_replicas() fills every step. Throws when a clone differs from the module in a
/// class, a parameter or a buffer (a class that does not override clone_structure()). They are
/// built under SkipInitGuard, so their layers draw no initial weights: wrapping a model in
/// DataParallel does not change the random numbers the training draws.
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
/// On a trace (util/trace.h), filling is one span, "replicate", and each gradient sent back to
/// the original's device during backward one span, "reduce" (both of category "parallel").
void fill_replicas(const Module& module, const std::vector<std::shared_ptr<Module>>& replicas,
                   const std::vector<Device>& devices);

/// New replicas of `module`, one per device (make_replica_shells + fill_replicas), like
/// torch.nn.parallel.replicate.
std::vector<std::shared_ptr<Module>> replicate(const Module& module, const std::vector<Device>& devices);

}  // namespace lockstep
