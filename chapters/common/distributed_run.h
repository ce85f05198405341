/// \file
/// What chapters 4 and 5 share around their training loop: starting a rank (threads, device,
/// process group) and the throughput over all ranks at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/device_choice.h"
#include "distributed/launch.h"
#include "distributed/process_group.h"
#include "distributed/process_group_options.h"
#include "tensor/tensor.h"

namespace lockstep {

/// A started rank: what the launcher said, the device it chose, and its process group.
struct DistributedRank {
  LaunchInfo launch;     ///< rank, world size and local rank from the launcher's environment
  DeviceChoice choice;   ///< the device (and why), for the rank's first line
  ProcessGroup* group;   ///< the default process group, which destroy_process_group() ends
};

/// The flags every distributed chapter shares about its ranks: --device, --backend, --threads,
/// and the process group's safety settings --collective-timeout SECONDS (the watchdog's
/// deadline) and --distributed-debug off|detail (compare every collective's fingerprint first),
/// which, unset, leave the choice to $LOCKSTEP_COLLECTIVE_TIMEOUT and $LOCKSTEP_DISTRIBUTED_DEBUG.
struct RankFlags {
  std::string device = "auto";               ///< --device: auto, cpu or cuda
  std::string backend = "auto";              ///< --backend: auto, mpi or nccl
  int threads = 0;                           ///< --threads: 0 shares the machine's cores
  std::optional<double> collective_timeout;  ///< --collective-timeout
  std::string distributed_debug;             ///< --distributed-debug: "off", "detail" or "" (not given)
  /// The ProcessGroupOptions the flags ask for.
  ProcessGroupOptions options() const;
};

/// Adds the RankFlags' five flags to `app`.
void add_rank_flags(CLI::App& app, RankFlags& flags);

/// Starts this rank of a job launched by mpirun (or alone): shares the machine's cores among its
/// ranks unless `--threads` > 0, resolves `--device` (auto, cpu, cuda) and `--backend` (auto,
/// mpi, nccl), makes a GPU current, initialises the process group with the flags' safety
/// settings, and prints who started the job.
DistributedRank start_rank(const RankFlags& flags);

/// Every rank's samples over the slowest rank's seconds, and the mean over ranks of the last
/// loss: all-reduced over `group`, so every rank gets the same numbers.
struct Throughput {
  double samples_per_s = 0.0;  ///< all ranks' samples / the slowest rank's training time
  double slowest_s = 0.0;      ///< the slowest rank's training time, seconds
  double mean_loss = 0.0;      ///< the ranks' last losses, averaged
};

/// Collects Throughput from each rank's `samples`, `train_seconds` and last `loss`.
Throughput all_rank_throughput(int64_t samples, double train_seconds, const Tensor& loss, ProcessGroup& group,
                               Device device);

}  // namespace lockstep
