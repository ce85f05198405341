/// \file
/// DataParallel (torch.nn.DataParallel): one process drives several replicas of a model. Every
/// forward pass scatters the batch, replicates the model, runs the replicas in parallel threads
/// and gathers their outputs on one device; the loss and backward pass then run as usual, and
/// autograd sums every replica's gradients into the original parameters. Chapter 3 measures
/// why this is slower than DistributedDataParallel (chapter 4).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "tensor/tensor.h"
#include "nn/module.h"
#include "parallel/data_parallel_timer.h"
#include "util/trace.h"

namespace lockstep {

/// Wraps `module` (already on devices[0]) to run on several devices at once, like
/// torch.nn.DataParallel(module, device_ids, output_device). Devices may repeat: several CPU
/// replicas run on threads, several replicas may share one GPU. Its state_dict() keys carry the
/// "module." prefix, as in PyTorch; save module().state_dict() to get the model's own keys.
/// Replicas sharing a GPU use that GPU's side streams, which belong to the whole process, so
/// one thread at a time may run DataParallel on a given GPU (and a DataParallel must not run
/// inside another's replica): two at once could hand each other memory still in use.
///
/// \see @ref chapter3 "Chapter 3: DataParallel", which introduces it.
class DataParallel : public Module {
 public:
  /// Replicas on `devices` (at least one); outputs gathered on `output_device` (devices[0] by
  /// default). The replicas' modules are built here (make_replica_shells) and again by a
  /// forward pass that finds the model changed (its str(): a layer added, Dropout's p set).
  /// Between steps they keep the last step's copies: n - 1 copies of the model's weights.
  DataParallel(std::shared_ptr<Module> module, std::vector<Device> devices,
               std::optional<Device> output_device = std::nullopt);

  /// input: (B, ...) -> the module's output for the whole batch, on the output device. With one
  /// device this is just module(input). Throws unless every parameter and buffer of the module
  /// is on devices[0].
  Tensor forward(const Tensor& input) override;

  /// The wrapped model (PyTorch's `.module`).
  Module& module() const { return *module_; }
  /// The replicas' devices.
  const std::vector<Device>& devices() const { return devices_; }
  /// Where outputs are gathered.
  Device output_device() const { return output_device_; }

  /// With `enabled`, every phase waits for the devices as it starts and before its clock
  /// stops, so that times() reports what the work took rather than how long it took to queue
  /// (a few synchronisations per step; nothing changes on the CPU).
  void set_profiling(bool enabled) { timer_->set_synchronize(enabled); }
  /// The phases' times so far (reduce: during backward passes of this module's outputs). They
  /// are the spans the phases open (DataParallelTimer), summed while this DataParallel lives.
  DataParallelTimes times() const { return timer_->times(); }
  /// Sets every time back to zero.
  void reset_times() { timer_->reset(); }

 private:
  // Throws unless every parameter and buffer is on devices_[0], naming the first that is not.
  void check_module_device() const;
  // The replicas for this step, one per device of `used`, filled with the module's weights
  // (built again first if the model has changed since they were built).
  std::vector<std::shared_ptr<Module>> replicas_for(const std::vector<Device>& used);

  std::shared_ptr<Module> module_;
  std::vector<Device> devices_;
  Device output_device_;
  std::vector<std::shared_ptr<Module>> replicas_;
  std::string replicas_built_for_;  // module_->str() when replicas_ were built
  std::shared_ptr<DataParallelTimer> timer_;
  SpanObservation timing_;  // sends the phases' spans to timer_ while this lives
};

}  // namespace lockstep
