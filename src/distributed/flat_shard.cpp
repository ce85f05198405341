#include "distributed/flat_shard.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "nn/clip_grad.h"
#include "tensor/autograd/grad_mode.h"

namespace lockstep {
namespace {

void check_flat(const Tensor& flat, const char* caller) {
  LOCKSTEP_CHECK(flat.defined(), caller, ": got an undefined tensor");
  LOCKSTEP_CHECK(flat.dim() == 1, caller, ": expected a flat (1-D) tensor, got shape ", shape_str(flat.shape()),
                 " (flatten it with reshape({numel}) first)");
}

}  // namespace

int64_t shard_numel(int64_t numel, int world_size) {
  LOCKSTEP_CHECK(world_size >= 1, "shard_numel: expected a world size of 1 or more, got ", world_size);
  LOCKSTEP_CHECK(numel >= 0, "shard_numel: expected a number of elements >= 0, got ", numel);
  return (numel + world_size - 1) / world_size;
}

Tensor shard_of(const Tensor& flat, int rank, int world_size) {
  check_flat(flat, "shard_of");
  LOCKSTEP_CHECK(rank >= 0 && rank < world_size, "shard_of: rank ", rank, " is not a rank of a world of ", world_size);
  NoGradGuard no_grad;
  const int64_t size = shard_numel(flat.numel(), world_size);
  const Tensor shard = zeros({size}, TensorOptions().dtype(flat.dtype()).device(flat.device()));
  // The part of [rank*size, (rank+1)*size) that lies inside flat; the rest stays zero.
  const int64_t begin = std::min(flat.numel(), rank * size), end = std::min(flat.numel(), (rank + 1) * size);
  if (end > begin) shard.slice(0, 0, end - begin).copy_(flat.slice(0, begin, end));
  return shard;
}

Tensor all_gather_shards(ProcessGroup& group, const Tensor& shard, int64_t numel) {
  check_flat(shard, "all_gather_shards");
  const int64_t size = shard_numel(numel, group.size());
  LOCKSTEP_CHECK(shard.numel() == size, "all_gather_shards: a shard of a tensor of ", numel, " elements over ",
                 group.size(), " ranks has ", size, " elements, this rank's has ", shard.numel());
  const Tensor padded = empty({size * group.size()}, TensorOptions().dtype(shard.dtype()).device(shard.device()));
  group.all_gather(padded, shard.contiguous());
  return padded.slice(0, 0, numel).contiguous();
}

Tensor reduce_scatter_to_shard(ProcessGroup& group, const Tensor& flat, ReduceOp op) {
  check_flat(flat, "reduce_scatter_to_shard");
  LOCKSTEP_CHECK(op == ReduceOp::Sum || op == ReduceOp::Avg,
                 "reduce_scatter_to_shard: expected ReduceOp::Sum or ReduceOp::Avg (what gradients need)");
  NoGradGuard no_grad;
  const int64_t size = shard_numel(flat.numel(), group.size());
  // The input padded with zeros to world * size elements, so that every shard is whole.
  const Tensor padded = zeros({size * group.size()}, TensorOptions().dtype(flat.dtype()).device(flat.device()));
  if (flat.numel() > 0) padded.slice(0, 0, flat.numel()).copy_(flat);
  const Tensor shard = empty({size}, TensorOptions().dtype(flat.dtype()).device(flat.device()));
  group.reduce_scatter(shard, padded, op);
  return shard;
}

double clip_grad_norm_(ProcessGroup& group, const std::vector<Tensor>& shards, double max_norm) {
  // Padding rows hold zero gradients: they add nothing.
  const Device device = shards.empty() ? Device::cpu() : shards.front().device();
  const Tensor squares = from_vector({grad_squared_sum(shards)}, {1}, TensorOptions().dtype(DType::f64).device(device));
  {
    const CollectiveCaller caller("clip_grad_norm_ over shards");
    group.all_reduce(squares, ReduceOp::Sum);
  }
  const double total = std::sqrt(squares.item());
  clip_grads_with_norm_(shards, max_norm, total);
  return total;
}

}  // namespace lockstep
