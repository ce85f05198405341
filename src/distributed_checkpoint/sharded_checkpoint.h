/// \file
/// Sharded checkpoints of FSDP, after PyTorch's torch.distributed.checkpoint: every rank writes
/// its own shards, and a job of any other size reads them back, each rank taking the rows its
/// new shards need from whichever files hold them.
///
///     DIR/shard-0-of-2.safetensors   rank 0's shards: "model.<name>" (its R rows of each
///     DIR/shard-1-of-2.safetensors   parameter), "optimizer.state.<i>.<state>" (the optimiser's
///                                    state of those rows), and on rank 0 "buffer.<name>"
///     DIR/index.safetensors          written last: every parameter's whole shape, the world
///                                    size, the optimiser's settings, the data position
///
/// Every file carries the save's random id and a checksum: shards of two saves mixed together,
/// a missing shard, a damaged file and a checkpoint of another model are each refused by name.
/// The data position is a global sample count (DistributedSampler::resume_at), so that after a
/// resume at another world size every sample of the interrupted epoch is still seen exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/fully_shard.h"
#include "distributed/process_group.h"
#include "optim/optimizer.h"

namespace lockstep {

/// Where a run stands when it saves: what resuming needs besides the tensors.
struct ShardedTrainingPosition {
  int64_t epoch = 0;          ///< The epoch in progress, from 0.
  int64_t step_in_epoch = 0;  ///< Steps of it done.
  int64_t global_step = 0;    ///< Steps since the start of training.
  int64_t batch_size = 0;     ///< Samples per step on each rank.
  uint64_t sampler_seed = 0;  ///< The DistributedSampler's seed.
};

/// What load_sharded_checkpoint found.
struct ShardedResumeInfo {
  ShardedTrainingPosition saved;  ///< The position as saved.
  int saved_world_size = 0;       ///< The ranks that saved it.
  int64_t samples_in_epoch = 0;   ///< Samples of the epoch done, over all ranks: resume_at's position.
  int64_t step_in_epoch = 0;      ///< The steps that is at this world size, rounded down.
  std::vector<std::string> notes; ///< What differs from the saving run, in sentences.
};

/// Writes the checkpoint of `root` (a FSDPModule over the whole model) and of `optimizer` (over
/// root.parameters()) into the folder `dir`, made if missing: each rank its shard file, then
/// rank 0 the index. `position` must be the same on every rank. A collective: every rank calls
/// it. Throws lockstep::Error naming the path when a file cannot be written.
void save_sharded_checkpoint(const std::string& dir, FSDPModule& root, const Optimizer& optimizer,
                             const ShardedTrainingPosition& position, ProcessGroup& group);

/// Reads the checkpoint in `dir`, saved at any world size, into `root`'s shards, `optimizer`'s
/// state and the model's buffers of this rank, resharding where the world size differs. Every
/// check comes before any change: a folder without an index, a missing or damaged file, a shard
/// of another save, another model (the first parameter that differs) and another optimiser are
/// errors that name the file and leave the model as it was. Every rank calls it.
ShardedResumeInfo load_sharded_checkpoint(const std::string& dir, FSDPModule& root, Optimizer& optimizer,
                                          ProcessGroup& group);

}  // namespace lockstep
