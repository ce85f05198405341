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
#include "parallel/replicate.h"

namespace lockstep {

/// Seconds spent in each phase of DataParallel's steps, summed since the last reset. Without
/// profiling a GPU phase's time is only the time to queue its work.
struct DataParallelTimes {
  double scatter = 0.0;    ///< Cutting the batch and sending the chunks to their devices.
  double replicate = 0.0;  ///< Copying parameters and buffers into the replicas.
  double forward = 0.0;    ///< parallel_apply: the replicas' forward passes.
  double gather = 0.0;     ///< Joining the outputs on the output device.
  double reduce = 0.0;     ///< During backward: sending replicas' gradients back to devices[0].
  int64_t steps = 0;       ///< Forward passes counted.
};

/// Wraps `module` (already on devices[0]) to run on several devices at once, like
/// torch.nn.DataParallel(module, device_ids, output_device). Devices may repeat: several CPU
/// replicas run on threads, several replicas may share one GPU. Its state_dict() keys carry the
/// "module." prefix, as in PyTorch; save module().state_dict() to get the model's own keys.
/// Replicas sharing a GPU use that GPU's side streams, which belong to the whole process, so
/// one thread at a time may run DataParallel on a given GPU (and a DataParallel must not run
/// inside another's replica): two at once could hand each other memory still in use.
class DataParallel : public Module {
 public:
  /// Replicas on `devices` (at least one); outputs gathered on `output_device` (devices[0] by
  /// default). The replicas' modules are built here (Module::clone_structure) and again by a
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

  /// With `enabled`, every phase waits for its devices before its clock stops, so that
  /// times() reports what the work took rather than how long it took to queue (a few
  /// synchronisations per step; nothing changes on the CPU).
  void set_profiling(bool enabled);
  /// The phases' times so far (reduce: during backward passes of this module's outputs).
  DataParallelTimes times() const;
  /// Sets every time back to zero.
  void reset_times();

 private:
  // Throws unless every parameter and buffer is on devices_[0], naming the first that is not.
  void check_module_device() const;
  // With profiling on, waits for the work queued on `devices` (a no-op for the CPU).
  void wait_if_profiling(const std::vector<Device>& devices) const;

  std::shared_ptr<Module> module_;
  std::vector<Device> devices_;
  Device output_device_;
  std::vector<std::shared_ptr<Module>> replicas_;
  std::string replicas_built_for_;  // module_->str() when replicas_ were built
  std::shared_ptr<GradientReturnClock> clock_ = std::make_shared<GradientReturnClock>();
  bool profiling_ = false;
  DataParallelTimes times_;
};

}  // namespace lockstep
