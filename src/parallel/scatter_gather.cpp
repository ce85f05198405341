#include "parallel/scatter_gather.h"

#include <algorithm>

#include "core/error.h"
#include "tensor/ops/cat.h"
#include "util/trace.h"

namespace lockstep {

std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices) {
  const RecordFunction span("scatter", "parallel");
  LOCKSTEP_CHECK(input.defined(), "scatter: the input is undefined");
  LOCKSTEP_CHECK(!devices.empty(), "scatter: expected at least one device");
  LOCKSTEP_CHECK(input.dim() >= 1 && input.size(0) >= 1, "scatter: expected a batch of at least one row along dim 0, got shape ",
                 shape_str(input.shape()));
  const int64_t rows = input.size(0), n = static_cast<int64_t>(devices.size());
  // chunk(n): every chunk has ceil(rows / n) rows except the last, so there may be fewer
  // chunks than devices (2 rows on 3 devices: two chunks of one row).
  const int64_t chunk_rows = (rows + n - 1) / n;
  std::vector<Tensor> chunks;
  for (int64_t start = 0, i = 0; start < rows; start += chunk_rows, ++i) {
    // chunk: (rows_i, ...), a view of the input's rows [start, start + rows_i)
    const Tensor chunk = input.slice(0, start, std::min(rows, start + chunk_rows));
    chunks.push_back(chunk.to(devices[static_cast<size_t>(i)], /*non_blocking=*/true));
  }
  return chunks;
}

Tensor gather(const std::vector<Tensor>& outputs, Device device) {
  const RecordFunction span("gather", "parallel");
  LOCKSTEP_CHECK(!outputs.empty(), "gather: expected at least one output");
  std::vector<Tensor> moved;
  for (const Tensor& output : outputs) {
    LOCKSTEP_CHECK(output.defined(), "gather: output ", moved.size(), " is undefined");
    // A scalar (0-d) output becomes one row, so that n scalars gather into a vector of n.
    const Tensor rows = output.dim() == 0 ? output.reshape({1}) : output;
    moved.push_back(rows.to(device));
  }
  return moved.size() == 1 ? moved[0] : cat(moved, 0);
}

}  // namespace lockstep
