// Exercise ch08_dim0_shards: your file. Cut a parameter into FSDP's dim-0 shards, padded, and
// put the shards back together.
// Build and test it with:  make exercise EX=ch08_dim0_shards
#include <vector>

#include "lockstep.h"

namespace exercise {

using namespace lockstep;

Tensor shard_dim0(const Tensor& whole, int rank, int world) {
  // TODO: rank `rank`'s shard of `whole` over `world` ranks, as fully_shard cuts it:
  //   - R = ceil(rows / world) rows per rank, rows = whole.size(0) (a 0-dim tensor has 1 row);
  //   - rank r keeps rows [r*R, (r+1)*R) of whole; the rows past the end are zeros (padding);
  //   - the result is a new f32 tensor of shape (R, the other dims of whole...): change it and
  //     `whole` must not change.
  // Useful: whole.reshape({rows, inner}), zeros({R, inner}), t.slice(0, begin, end), copy_.
  (void)whole;
  (void)rank;
  (void)world;
  throw Error("shard_dim0: not written yet (write the TODO in starter.cpp)");
}

Tensor unshard_dim0(const std::vector<Tensor>& shards, const Shape& whole_shape) {
  // TODO: the whole tensor of shape `whole_shape` from every rank's shard (rank 0's first),
  // what the all-gather before a unit's forward gives back: the shards' rows one after another,
  // the padding rows dropped.
  (void)shards;
  (void)whole_shape;
  throw Error("unshard_dim0: not written yet (write the TODO in starter.cpp)");
}

}  // namespace exercise
