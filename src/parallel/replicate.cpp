#include "parallel/replicate.h"

#include <typeinfo>

#include "tensor/autograd/node.h"
#include "core/error.h"
#include "nn/init.h"
#include "util/trace.h"

namespace lockstep {

namespace {

// Throws unless every module of the replica's tree has the class of the module's at the same
// place: a class that inherits clone_structure() without overriding it builds its base class,
// whose forward() would run instead of its own.
void check_same_classes(const Module& module, const Module& replica, const std::string& where) {
  LOCKSTEP_CHECK(typeid(module) == typeid(replica), "replicate: clone_structure() of ", module.name(), where,
                 " built a ", replica.name(), ": override clone_structure() in ", module.name(), " to return a new ",
                 module.name());
  const auto mine = module.named_children(), theirs = replica.named_children();
  LOCKSTEP_CHECK(mine.size() == theirs.size(), "replicate: clone_structure() of ", module.name(), where, " built ",
                 theirs.size(), " children instead of ", mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    check_same_classes(*mine[i].second, *theirs[i].second, " (at '" + mine[i].first + "')");
  }
}

// Throws unless `replica` has the module's parameters and buffers, by name and shape, in order.
void check_same_layout(const Module& module, const Module& replica) {
  check_same_classes(module, replica, "");
  for (const bool parameters : {true, false}) {
    const auto mine = parameters ? module.named_parameters() : module.named_buffers();
    const auto theirs = parameters ? replica.named_parameters() : replica.named_buffers();
    const char* what = parameters ? "parameters" : "buffers";
    LOCKSTEP_CHECK(mine.size() == theirs.size(), "replicate: a replica of ", module.name(), " has ", theirs.size(), " ",
                   what, " but the module has ", mine.size(), ": clone_structure() must build the same layers (and "
                   "modules that share one tensor between two layers cannot be replicated)");
    for (size_t i = 0; i < mine.size(); ++i) {
      LOCKSTEP_CHECK(mine[i].first == theirs[i].first && mine[i].second.shape() == theirs[i].second.shape(),
                     "replicate: the replica's '", theirs[i].first, "' ", shape_str(theirs[i].second.shape()),
                     " does not match the module's '", mine[i].first, "' ", shape_str(mine[i].second.shape()),
                     ": clone_structure() must build the same layers with the same settings");
    }
  }
}

// The original's data on `device`, for replica `index`: replica 0 on the original's own device
// shares its memory; every other replica gets its own copy.
Tensor data_for(const Tensor& original, size_t index, Device device) {
  const Tensor data = original.detach();
  if (device == original.device()) return index == 0 ? data : data.clone();
  return data.to(device, /*non_blocking=*/true);
}

// Gives each module of the replica its original's training flag, one module at a time (a
// BatchNorm in evaluation mode inside a model in training mode stays in evaluation mode).
void copy_training_flags(const Module& module, Module& replica) {
  replica.train(module.is_training());  // also sets the children, which are corrected next
  const auto mine = module.children(), theirs = replica.children();
  for (size_t i = 0; i < mine.size(); ++i) copy_training_flags(*mine[i], *theirs[i]);
}

}  // namespace

std::vector<std::shared_ptr<Module>> make_replica_shells(const Module& module, size_t count) {
  // fill_replicas overwrites every value: the layers need not draw initial weights.
  const SkipInitGuard no_draws;
  std::vector<std::shared_ptr<Module>> shells;
  for (size_t i = 0; i < count; ++i) {
    shells.push_back(module.clone_structure());
    check_same_layout(module, *shells.back());
  }
  return shells;
}

void fill_replicas(const Module& module, const std::vector<std::shared_ptr<Module>>& replicas,
                   const std::vector<Device>& devices) {
  const RecordFunction span("replicate", "parallel");
  LOCKSTEP_CHECK(replicas.size() == devices.size(), "replicate: ", replicas.size(), " replicas for ", devices.size(),
                 " devices; expected one replica per device");
  const auto module_parameters = module.named_parameters();
  const auto module_buffers = module.named_buffers();
  for (size_t i = 0; i < replicas.size(); ++i) {
    Module& replica = *replicas[i];
    const Device device = devices[i];
    copy_training_flags(module, replica);

    //! [broadcast]
    // Parameters: a copy per replica that autograd links back to the original. The backward
    // of the copy sends its gradient to the original's device; autograd adds up the gradients
    // of all replicas there before AccumulateGrad writes them into the original's grad.
    const auto replica_parameters = replica.named_parameters();
    const auto replica_buffers = replica.named_buffers();
    LOCKSTEP_CHECK(replica_parameters.size() == module_parameters.size() && replica_buffers.size() == module_buffers.size(),
                   "replicate: replica ", i, " was built for a module with ", replica_parameters.size(), " parameters and ",
                   replica_buffers.size(), " buffers, but the module now has ", module_parameters.size(), " and ",
                   module_buffers.size(), ": build the replicas again (make_replica_shells)");
    for (size_t j = 0; j < module_parameters.size(); ++j) {
      const Tensor& original = module_parameters[j].second;
      const Tensor& copy = replica_parameters[j].second;
      const Device source = original.device();
      const Tensor linked = record(data_for(original, i, device), "BroadcastBackward", {original},
                                   [source](const Tensor& grad) {
                                     // On the original's device already: nothing to send.
                                     if (grad.device() == source) return std::vector<Tensor>{grad};
                                     // The gradient's way back, DataParallel's "reduce" phase.
                                     const RecordFunction span("reduce", "parallel");
                                     return std::vector<Tensor>{grad.to(source)};
                                   });
      copy.set_data(linked);
      copy.set_grad_fn(linked.grad_fn());  // null when nothing is recorded (no_grad, frozen)
    }
    //! [broadcast]

    // Buffers: plain copies; replica 0 on the module's device shares the original's.
    for (size_t j = 0; j < module_buffers.size(); ++j) {
      replica_buffers[j].second.set_data(data_for(module_buffers[j].second, i, device));
    }
  }
}

std::vector<std::shared_ptr<Module>> replicate(const Module& module, const std::vector<Device>& devices) {
  const auto replicas = make_replica_shells(module, devices.size());
  fill_replicas(module, replicas, devices);
  return replicas;
}

}  // namespace lockstep
