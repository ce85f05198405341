#include "parallel/data_parallel.h"

#include "core/cuda/context.h"
#include "core/error.h"
#include "parallel/parallel_apply.h"
#include "parallel/scatter_gather.h"
#include "util/timer.h"

namespace lockstep {

DataParallel::DataParallel(std::shared_ptr<Module> module, std::vector<Device> devices, std::optional<Device> output_device)
    : devices_(std::move(devices)), output_device_(Device::cpu()) {
  LOCKSTEP_CHECK(module != nullptr, "DataParallel: the module is null");
  LOCKSTEP_CHECK(!devices_.empty(), "DataParallel: expected at least one device");
  output_device_ = output_device.value_or(devices_[0]);
  // Registered as a child, so parameters() reach the optimiser and state_dict() keys read
  // "module.<name>", as PyTorch's do.
  module_ = register_module("module", std::move(module));
  if (devices_.size() > 1) {
    replicas_ = make_replica_shells(*module_, devices_.size());
    replicas_built_for_ = module_->str();
  }
}

void DataParallel::check_module_device() const {
  for (const bool parameters : {true, false}) {
    for (const auto& [name, tensor] : parameters ? module_->named_parameters() : module_->named_buffers()) {
      LOCKSTEP_CHECK(tensor.device() == devices_[0], "DataParallel: the module must have its parameters and buffers on "
                     "devices[0] (", devices_[0], "), but '", name, "' is on ", tensor.device(), ": call model->to(",
                     devices_[0], ") before the forward pass");
    }
  }
}

void DataParallel::wait_if_profiling(const std::vector<Device>& devices) const {
  if (!profiling_) return;
  for (const Device device : devices) {
    if (device.is_cuda()) cuda::synchronize(device);
  }
}

Tensor DataParallel::forward(const Tensor& input) {
  check_module_device();
  ++times_.steps;
  Timer timer;
  // One device: no replicas, no threads (as PyTorch does).
  if (devices_.size() == 1) {
    const Tensor output = (*module_)(input.to(devices_[0], /*non_blocking=*/true)).to(output_device_);
    wait_if_profiling(devices_);
    times_.forward += timer.seconds();
    return output;
  }

  // PyTorch copies every module's settings at every step; here the replicas are built again
  // when the model's description (its layers and their settings) has changed since.
  if (const std::string now = module_->str(); now != replicas_built_for_) {
    replicas_ = make_replica_shells(*module_, devices_.size());
    replicas_built_for_ = now;
  }

  timer.reset();

  //! [forward]
  // 1. Scatter: chunks of ceil(B / n) rows, one per device (fewer chunks when B < n).
  const std::vector<Tensor> chunks = scatter(input, devices_);
  const std::vector<Device> used(devices_.begin(), devices_.begin() + static_cast<std::ptrdiff_t>(chunks.size()));
  wait_if_profiling(used);
  times_.scatter += timer.seconds();

  // 2. Replicate: this step's weights into each replica, linked to the originals by autograd.
  timer.reset();
  const std::vector<std::shared_ptr<Module>> replicas(replicas_.begin(), replicas_.begin() + static_cast<std::ptrdiff_t>(chunks.size()));
  fill_replicas(*module_, replicas, used, clock_);
  wait_if_profiling(used);
  times_.replicate += timer.seconds();

  // 3. Parallel apply: every replica's forward pass at once, one thread each.
  timer.reset();
  const std::vector<Tensor> outputs = parallel_apply(replicas, chunks, used);
  wait_if_profiling(used);
  times_.forward += timer.seconds();

  // 4. Gather: the outputs joined on the output device, where the loss will be computed.
  timer.reset();
  const Tensor output = gather(outputs, output_device_);
  wait_if_profiling({output_device_});
  times_.gather += timer.seconds();
  //! [forward]
  return output;
}

void DataParallel::set_profiling(bool enabled) {
  profiling_ = enabled;
  clock_->synchronize = enabled;
}

DataParallelTimes DataParallel::times() const {
  DataParallelTimes times = times_;
  times.reduce = static_cast<double>(clock_->nanoseconds.load()) * 1e-9;
  return times;
}

void DataParallel::reset_times() {
  times_ = DataParallelTimes();
  clock_->nanoseconds = 0;
}

}  // namespace lockstep
