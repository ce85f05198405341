#include "parallel/data_parallel.h"

#include "core/error.h"
#include "parallel/parallel_apply.h"
#include "parallel/replicate.h"
#include "parallel/scatter_gather.h"

namespace lockstep {

namespace {
// devices[0], where the module lives and, by default, the outputs are gathered; checked first.
Device first_of(const std::vector<Device>& devices) {
  LOCKSTEP_CHECK(!devices.empty(), "DataParallel: expected at least one device");
  return devices[0];
}

// Every device a step touches: the replicas' and the output device.
std::vector<Device> with_output(std::vector<Device> devices, Device output_device) {
  devices.push_back(output_device);
  return devices;
}
}  // namespace

DataParallel::DataParallel(std::shared_ptr<Module> module, std::vector<Device> devices, std::optional<Device> output_device)
    : devices_(std::move(devices)),
      output_device_(output_device.value_or(first_of(devices_))),
      timer_(std::make_shared<DataParallelTimer>(with_output(devices_, output_device_))),
      timing_("parallel", timer_) {
  LOCKSTEP_CHECK(module != nullptr, "DataParallel: the module is null");
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

std::vector<std::shared_ptr<Module>> DataParallel::replicas_for(const std::vector<Device>& used) {
  // PyTorch copies every module's settings at every step; here the replicas are built again
  // when the model's description (its layers and their settings) has changed since.
  if (const std::string now = module_->str(); now != replicas_built_for_) {
    replicas_ = make_replica_shells(*module_, devices_.size());
    replicas_built_for_ = now;
  }
  const auto first = replicas_.begin();
  const std::vector<std::shared_ptr<Module>> replicas(first, first + static_cast<std::ptrdiff_t>(used.size()));
  fill_replicas(*module_, replicas, used);
  return replicas;
}

Tensor DataParallel::forward(const Tensor& input) {
  check_module_device();
  // One device: no replicas, no threads (as PyTorch does); the whole pass is the forward phase.
  if (devices_.size() == 1) {
    const RecordFunction span("forward", "parallel");
    return (*module_)(input.to(devices_[0], /*non_blocking=*/true)).to(output_device_);
  }

  //! [forward]
  // Scatter: chunks of ceil(B / n) rows, one per device (fewer chunks when B < n).
  const std::vector<Tensor> chunks = scatter(input, devices_);
  const std::vector<Device> used(devices_.begin(), devices_.begin() + static_cast<std::ptrdiff_t>(chunks.size()));

  // Replicate: this step's weights into one replica per chunk, linked to the originals by
  //    autograd.
  const std::vector<std::shared_ptr<Module>> replicas = replicas_for(used);

  // Parallel apply: every replica's forward pass at once, one thread each.
  const std::vector<Tensor> outputs = parallel_apply(replicas, chunks, used);

  // Gather: the outputs joined on the output device, where the loss will be computed.
  return gather(outputs, output_device_);
  //! [forward]
}

}  // namespace lockstep
