#include "parallel/parallel_apply.h"

#include <algorithm>
#include <exception>
#include <map>
#include <string>

#include "tensor/autocast.h"
#include "tensor/autograd/grad_mode.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/threads.h"
#include "util/trace.h"

#include <omp.h>

namespace lockstep {

namespace {

// Where replica i runs: its device, its CPU thread count, and on a GPU the stream it queues on.
struct Placement {
  Device device;
  int cpu_threads = 1;
  cuda::StreamHandle stream = nullptr;
};

// CPU replicas split the caller's threads; a GPU replica only queues work, on one CPU thread.
// On a GPU the first replica of each device uses the caller's stream, and each further one a
// side stream that first waits for the caller's work.
std::vector<Placement> place(const std::vector<Device>& devices) {
  const int threads = cpu_threads_per_replica(devices);
  std::map<int, int> seen_on_gpu;  // GPU index -> replicas placed on it so far
  std::vector<Placement> placements;
  for (const Device device : devices) {
    Placement p{device, device.is_cpu() ? threads : 1, nullptr};
    if (device.is_cuda()) {
      const int earlier = seen_on_gpu[device.index()]++;
      const cuda::StreamHandle caller = cuda::current_stream(device);
      p.stream = earlier == 0 ? caller : cuda::side_stream(device, earlier - 1);
      cuda::stream_wait(device, p.stream, caller);
    }
    placements.push_back(p);
  }
  return placements;
}

}  // namespace

std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<Module>>& replicas,
                                   const std::vector<Tensor>& inputs, const std::vector<Device>& devices) {
  const RecordFunction span("parallel_apply", "parallel");
  LOCKSTEP_CHECK(replicas.size() == inputs.size() && inputs.size() == devices.size() && !replicas.empty(),
                 "parallel_apply: expected as many replicas as inputs and devices (at least one), got ", replicas.size(),
                 ", ", inputs.size(), " and ", devices.size());
  const size_t n = replicas.size();
  const std::vector<Placement> placements = place(devices);
  const bool grad_mode = grad_mode_enabled();
  // Autocast, also per thread: the replicas run in the caller's region (as PyTorch's do).
  const bool cpu_autocast = is_autocast_enabled(DeviceType::CPU), cuda_autocast = is_autocast_enabled(DeviceType::CUDA);
  const DType cpu_dtype = get_autocast_dtype(DeviceType::CPU), cuda_dtype = get_autocast_dtype(DeviceType::CUDA);
  // Each replica draws random numbers (dropout masks) from a generator of its own, seeded from
  // the default one here, in order: the masks follow from the seed, whichever thread runs first.
  std::vector<uint64_t> seeds(n);
  {
    const auto lock = lock_default_generator(nullptr);
    for (uint64_t& seed : seeds) seed = default_generator().next();
  }
  std::vector<Tensor> outputs(n);
  std::vector<std::exception_ptr> errors(n);

  //! [worker]
  // One replica's forward pass, in its own thread: the thread takes the caller's grad mode and
  // autocast region (per-thread settings), its own random generator, its share of the CPU threads (one, for a
  // GPU replica) and on a GPU its stream, and keeps any error for the caller, because an
  // exception cannot cross from one thread to another by itself.
  const auto worker = [&](size_t i) {
    const Placement& p = placements[i];
    // On a trace, each replica's forward pass is on its thread's row (replica 0 runs on the
    // caller's own row).
    if (i > 0 && trace_enabled()) set_trace_thread_name("replica " + std::to_string(i));
    try {
      // The threads live on after the call (one of them is the caller): put back what changes.
      const bool thread_grad_mode = grad_mode_enabled();
      const cuda::StreamHandle thread_stream = p.device.is_cuda() ? cuda::current_stream(p.device) : nullptr;
      const auto restore = [&] {
        set_grad_mode(thread_grad_mode);
        if (p.device.is_cuda()) cuda::set_current_stream(p.device, thread_stream);
      };
      Generator generator(seeds[i]);
      const ThreadGeneratorGuard own_generator(generator);
      set_grad_mode(grad_mode);
      const AutocastGuard cpu_region(DeviceType::CPU, cpu_dtype, cpu_autocast);
      const AutocastGuard cuda_region(DeviceType::CUDA, cuda_dtype, cuda_autocast);
      set_num_threads(p.cpu_threads);
      if (p.device.is_cuda()) cuda::set_current_stream(p.device, p.stream);
      try {
        outputs[i] = (*replicas[i])(inputs[i]);
      } catch (...) {
        restore();
        throw;
      }
      restore();
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  //! [worker]

  //! [threads]
  // The threads are the caller's own OpenMP team, one per replica (the caller is thread 0 and
  // runs replica 0). Fresh std::threads would also work, but the team's idle threads keep
  // spinning on the cores for a while after each parallel loop, and would take them from the
  // replicas. Kernels inside a replica use its share of the CPU threads (nested parallelism).
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(std::max(levels, 2));
#pragma omp parallel for num_threads(static_cast<int>(n)) schedule(static, 1)
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) worker(static_cast<size_t>(i));
  omp_set_max_active_levels(levels);
  //! [threads]

  // The caller's later work (gather, backward) waits on the GPU for every side stream.
  for (const Placement& p : placements) {
    if (p.device.is_cuda()) cuda::stream_wait(p.device, cuda::current_stream(p.device), p.stream);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& error) {
      // The replica's error keeps its kind (a full GPU stays OutOfMemory) and gains its place.
      const auto* lockstep_error = dynamic_cast<const Error*>(&error);
      throw Error(lockstep_error ? lockstep_error->kind() : ErrorKind::Other,
                  "replica " + std::to_string(i) + " on " + devices[i].str() + " failed: " + error.what());
    } catch (...) {
      throw;  // not a std::exception: nothing to add a message to
    }
  }
  return outputs;
}

int cpu_threads_per_replica(const std::vector<Device>& devices) {
  const auto cpu_replicas = std::count_if(devices.begin(), devices.end(), [](Device d) { return d.is_cpu(); });
  return std::max(1, get_num_threads() / std::max<int>(1, static_cast<int>(cpu_replicas)));
}

}  // namespace lockstep
