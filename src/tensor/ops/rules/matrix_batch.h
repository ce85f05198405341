/// \file
/// The layout of a batched matrix product, shared by both backends' batched GEMM
/// (tensor/ops/dispatch/matmul_kernels.h): c[i] = a[i] b[i] + beta * c[i] for every matrix i
/// of a batch, where c is contiguous and each operand reaches its matrices through its own
/// strides, a stride of 0 repeating one matrix over a broadcast batch dimension.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lockstep {

/// Where the matrices of a batched product lie. The batch is walked in row-major order (the
/// last batch dimension fastest); matrix i of c starts at element i * M * N.
struct BatchedGemm {
  std::vector<int64_t> batch;            ///< The batch dimensions' sizes (c's shape without M, N).
  std::vector<int64_t> a_batch_strides;  ///< a's stride along each batch dimension (0: broadcast).
  std::vector<int64_t> b_batch_strides;  ///< b's stride along each batch dimension (0: broadcast).
  int64_t M = 0;                         ///< Rows of every a[i] and c[i].
  int64_t N = 0;                         ///< Columns of every b[i] and c[i].
  int64_t K = 0;                         ///< Columns of a[i], rows of b[i]: the summed dimension.
  int64_t a_row_stride = 0;              ///< Distance between a[i](r, k) and a[i](r + 1, k).
  int64_t a_col_stride = 0;              ///< Distance between a[i](r, k) and a[i](r, k + 1).
  int64_t b_row_stride = 0;              ///< Distance between b[i](k, j) and b[i](k + 1, j).
  int64_t b_col_stride = 0;              ///< Distance between b[i](k, j) and b[i](k, j + 1).

  /// How many matrices the batch holds (1 when there are no batch dimensions).
  int64_t matrices() const {
    int64_t n = 1;
    for (int64_t size : batch) n *= size;
    return n;
  }

  /// The element offsets of a[index] and b[index] from a's and b's first elements.
  std::pair<int64_t, int64_t> offsets(int64_t index) const {
    int64_t oa = 0, ob = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      const int64_t i = index % batch[d];
      index /= batch[d];
      oa += i * a_batch_strides[d];
      ob += i * b_batch_strides[d];
    }
    return {oa, ob};
  }
};

}  // namespace lockstep
