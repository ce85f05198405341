/// \file
/// Sharding a flat tensor across ranks, the layout of ZeRO and FSDP: a tensor of any length is
/// padded with zeros to a multiple of the world size and cut into equal shards, rank r keeping
/// the r-th. The two collectives of sharded data parallelism then work on any length:
///
///     flat: (numel)          padded: (world * shard_numel)          rank r: padded[r*s, (r+1)*s)
///
///     reduce_scatter_to_shard   every rank's whole flat gradient in, the sum (or average) of this
///                               rank's shard out: what ZeRO-2 and FSDP send after backward;
///     all_gather_shards         every rank's shard in, the whole flat tensor out, padding dropped:
///                               what FSDP sends before a unit's forward and backward.
#pragma once

#include <cstdint>
#include <vector>

#include "distributed/process_group.h"

namespace lockstep {

/// Elements of each rank's shard of a flat tensor of `numel` elements over `world_size` ranks:
/// numel / world_size rounded up (0 for an empty tensor).
int64_t shard_numel(int64_t numel, int world_size);

/// Rank `rank`'s shard of the 1-D tensor `flat`: a new tensor of shard_numel(flat.numel(),
/// world_size) elements, its dtype and device, zeros past the end of `flat`.
Tensor shard_of(const Tensor& flat, int rank, int world_size);

/// Every rank's `shard` (1-D, shard_numel(numel, size) elements, one dtype and device on every
/// rank) gathered, rank 0's first, into a new 1-D tensor of the first `numel` elements: the whole
/// tensor, its padding dropped. A collective: every rank calls it.
Tensor all_gather_shards(ProcessGroup& group, const Tensor& shard, int64_t numel);

/// The element-wise `op` (ReduceOp::Sum or ReduceOp::Avg) of every rank's 1-D `flat` (the same
/// length on every rank), of which this rank receives its shard: a new tensor of
/// shard_numel(flat.numel(), size) elements, zeros past the end. A collective: every rank calls it.
Tensor reduce_scatter_to_shard(ProcessGroup& group, const Tensor& flat, ReduceOp op = ReduceOp::Sum);

/// clip_grad_norm_ (nn/clip_grad.h) when each rank holds a different part of the gradients
/// (ZeRO-2's, FSDP's shards): the sum of this rank's squares, all-reduced, gives the whole
/// model's norm, the norm DDP would find up to the order of the additions; every rank then
/// scales its `shards`' gradients by the same factor. Returns that norm. A collective.
double clip_grad_norm_(ProcessGroup& group, const std::vector<Tensor>& shards, double max_norm);

}  // namespace lockstep
