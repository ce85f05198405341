// Exercise ch08_dim0_shards: a reference solution.
#include <algorithm>
#include <vector>

#include "lockstep.h"

namespace exercise {

using namespace lockstep;

namespace {
int64_t rows_of(const Shape& shape) { return shape.empty() ? 1 : shape[0]; }
}  // namespace

Tensor shard_dim0(const Tensor& whole, int rank, int world) {
  const int64_t rows = rows_of(whole.shape()), inner = whole.numel() / rows;
  const int64_t per = (rows + world - 1) / world;
  const Tensor out = zeros({per, inner});
  // This rank's real rows; the rest of `out` stays zero: the padding.
  const int64_t begin = std::min(rows, rank * per), end = std::min(rows, begin + per);
  if (end > begin) out.slice(0, 0, end - begin).copy_(whole.reshape({rows, inner}).slice(0, begin, end));
  Shape shape = whole.shape();
  if (shape.empty()) shape.push_back(1);
  shape[0] = per;
  return out.view(shape);
}

Tensor unshard_dim0(const std::vector<Tensor>& shards, const Shape& whole_shape) {
  const int64_t rows = rows_of(whole_shape), inner = shape_numel(whole_shape) / rows;
  const Tensor out = zeros({rows, inner});
  int64_t row = 0;
  for (const Tensor& shard : shards) {
    const int64_t per = shard.size(0), take = std::min(per, rows - row);
    if (take > 0) out.slice(0, row, row + take).copy_(shard.reshape({per, inner}).slice(0, 0, take));
    row += take;
  }
  return out.reshape(whole_shape);
}

}  // namespace exercise
