#include "common/distributed_run.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/cuda/context.h"
#include "core/device.h"
#include "core/threads.h"
#include "common/program.h"
#include "distributed/collective_caller.h"

namespace lockstep {

ProcessGroupOptions RankFlags::options() const {
  ProcessGroupOptions options;
  if (collective_timeout) options.timeout(*collective_timeout);
  if (!distributed_debug.empty()) {
    options.debug(distributed_debug == "detail" ? DistributedDebug::detail : DistributedDebug::off);
  }
  return options;
}

void add_rank_flags(CLI::App& app, RankFlags& flags) {
  app.add_option("--device", flags.device, "auto (each rank the GPU of its local rank when this machine has one per "
                                           "rank, else cpu), cpu or cuda (each rank the GPU of its local rank)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--backend", flags.backend, "auto (NCCL when every rank has its own GPU, else MPI), mpi or nccl")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}));
  app.add_option("--threads", flags.threads, "CPU threads per rank (default: this machine's cores / its ranks)")
      ->check(thread_count());
  app.add_option("--collective-timeout", flags.collective_timeout,
                 "seconds a collective may wait before the watchdog ends the job, naming the ranks that never came "
                 "(0: never; default $LOCKSTEP_COLLECTIVE_TIMEOUT, else 60)")
      ->check(non_negative_number());
  app.add_option("--distributed-debug", flags.distributed_debug,
                 "detail: the ranks compare every collective before running it and name the first that differs "
                 "(default $LOCKSTEP_DISTRIBUTED_DEBUG, else off)")
      ->check(CLI::IsMember({"off", "detail"}));
}

DistributedRank start_rank(const RankFlags& flags) {
  //! [launch]
  // Who are we? mpirun started this program world_size times; the launcher's environment
  //    tells each copy its rank. The threads of this machine are shared between its ranks.
  const LaunchInfo launch = detect_launch();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(flags.threads > 0 ? flags.threads : std::max(1, cores / launch.local_world_size));
  //    By default (auto) each rank takes the GPU of its local rank where the machine has one per
  //    rank, and the CPU otherwise.
  const DeviceChoice choice = resolve_device(flags.device, launch.local_rank, launch.local_world_size);
  const Device device = choice.device;
  const std::string backend = choose_backend(flags.backend, device, launch, cuda_device_count());
  // This rank's GPU becomes its current device before any CUDA work, or every rank would also
  // open a context on cuda:0 (PyTorch's torch.cuda.set_device(local_rank)).
  if (device.is_cuda()) cuda::set_device(device);

  // The process group: MPI starts, and with NCCL each rank opens a communicator on its GPU.
  ProcessGroup& group = *init_process_group(backend, device, flags.options());
  log_rank(choice.start_line());
  print_rank0("world: " + std::to_string(group.size()) + " rank(s) started by " + launch.launcher + ", backend " +
              group.backend_name() + ", " + std::to_string(get_num_threads()) + " thread(s) per rank");
  //! [launch]
  return {launch, choice, &group};
}

Throughput all_rank_throughput(int64_t samples, double train_seconds, const Tensor& loss, ProcessGroup& group,
                               Device device) {
  const CollectiveCaller caller("throughput totals");
  const Tensor totals = from_vector({static_cast<double>(samples), loss.detach().to(DType::f64).item()}, {2},
                                    TensorOptions().dtype(DType::f64).device(device));
  group.all_reduce(totals, ReduceOp::Sum);
  const Tensor slowest = full({1}, train_seconds, TensorOptions().dtype(DType::f64).device(device));
  group.all_reduce(slowest, ReduceOp::Max);
  const std::vector<double> summed = totals.to(Device::cpu()).to_vector<double>();
  const double seconds = slowest.item();
  return {summed[0] / seconds, seconds, summed[1] / group.size()};
}

}  // namespace lockstep
