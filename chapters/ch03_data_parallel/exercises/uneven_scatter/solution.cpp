// Exercise ch03_uneven_scatter: the reference solution.
#include <algorithm>
#include <vector>

#include "lockstep.h"

namespace exercise {

using namespace lockstep;

std::vector<Tensor> scatter_batch(const Tensor& batch, const std::vector<Device>& devices) {
  const int64_t rows = batch.size(0), n = static_cast<int64_t>(devices.size());
  const int64_t chunk_rows = (rows + n - 1) / n;  // ceil(rows / n)
  std::vector<Tensor> chunks;
  for (int64_t start = 0; start < rows; start += chunk_rows) {
    const Tensor rows_of_chunk = batch.slice(0, start, std::min(rows, start + chunk_rows));
    chunks.push_back(rows_of_chunk.to(devices[chunks.size()]));
  }
  return chunks;
}

}  // namespace exercise
