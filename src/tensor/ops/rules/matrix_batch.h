/// \file
/// Where each matrix of a batched product starts, shared by both backends' batched GEMM
/// (tensor/ops/dispatch/matmul_kernels.h): the batch dimensions of out are walked in row-major
/// order, and each operand reaches its matrix through its own strides, where a stride of 0
/// repeats one matrix over a broadcast batch dimension.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lockstep {

/// The element offsets (in a and in b) of matrix `index` of a batch of shape `batch`
/// (row-major, the last dimension fastest); a_strides and b_strides hold at least the batch
/// dimensions' strides, first.
inline std::pair<int64_t, int64_t> matrix_offsets(int64_t index, const std::vector<int64_t>& batch,
                                                  const std::vector<int64_t>& a_strides,
                                                  const std::vector<int64_t>& b_strides) {
  int64_t oa = 0, ob = 0;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    const int64_t i = index % batch[d];
    index /= batch[d];
    oa += i * a_strides[d];
    ob += i * b_strides[d];
  }
  return {oa, ob};
}

}  // namespace lockstep
