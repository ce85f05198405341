// The plumbing shared by the CUDA reductions that see their input as rows (sum_kernel in
// reduce_kernels.cu, max_kernel in max_kernels.cu): how rows are split among threads, and how
// a warp or a block combines one value per thread into one.
//
// Work is cut into items: item (row, chunk) is a piece of one row, reduced by a group of
// threads (a warp for short pieces, a whole block for long ones) whose threads read
// neighbouring elements (coalesced) and then combine with warp shuffles. A long row split
// into several chunks gives partial results, one per chunk, which a second pass reduces the
// same way, so even a single row (a sum of every element) keeps the whole GPU busy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tensor/ops/cuda/launch.cuh"

namespace lockstep::cuda {

constexpr int kWarpSize = 32;
constexpr unsigned int kFullMask = 0xffffffffu;

// rows rows of row_len elements each, cut into chunks pieces of chunk_len (the last may be
// shorter, none is empty); item = row * chunks + chunk.
struct RowSplit {
  int64_t rows = 0;
  int64_t row_len = 0;
  int64_t chunks = 1;
  int64_t chunk_len = 0;
  __host__ __device__ int64_t items() const { return rows * chunks; }
};

// A chunk is at least 32 elements per thread of a block (fewer would not pay for the second
// pass); rows are cut until there are about kTargetItems items, enough to fill every
// multiprocessor of a large GPU several times over.
constexpr int64_t kMinChunk = 32 * kBlockSize;
constexpr int64_t kTargetItems = 2048;

inline RowSplit split_rows(int64_t rows, int64_t row_len) {
  RowSplit split;
  split.rows = rows;
  split.row_len = row_len;
  if (row_len == 0 || rows == 0) return split;
  const int64_t wanted = std::min((row_len + kMinChunk - 1) / kMinChunk, (kTargetItems + rows - 1) / rows);
  split.chunk_len = (row_len + wanted - 1) / wanted;
  split.chunks = (row_len + split.chunk_len - 1) / split.chunk_len;
  return split;
}

// Threads per item: a whole block for long chunks, a warp for short ones (a block on a
// 20-element row would leave most of its threads idle).
inline bool use_block_groups(const RowSplit& split) { return split.chunk_len >= 4 * kBlockSize; }

// Calls launch(std::integral_constant<int, G>{}, blocks) with the group size G (threads per
// item) for `split` and the number of blocks of kBlockSize threads that cover its items.
template <class Launch>
void launch_groups(const RowSplit& split, Launch&& launch) {
  if (use_block_groups(split)) {
    launch(std::integral_constant<int, kBlockSize>{}, grid_size(split.items(), 1));
  } else {
    launch(std::integral_constant<int, kWarpSize>{}, grid_size(split.items(), kBlockSize / kWarpSize));
  }
}

// __shfl_down_sync for any element type: types narrower than int (bool, u8) travel as int.
template <class T>
__device__ __forceinline__ T shfl_down(T value, int delta) {
  if constexpr (sizeof(T) < sizeof(int)) {
    return static_cast<T>(__shfl_down_sync(kFullMask, static_cast<int>(value), delta));
  } else {
    return __shfl_down_sync(kFullMask, value, delta);
  }
}

//! [warp reduce]
// Combines the values of the 32 lanes of a warp; lane 0 gets the result. Each step folds the
// upper half of the remaining lanes onto the lower half: 16, 8, 4, 2, 1.
template <class V, class Combine>
__device__ __forceinline__ V warp_reduce(V value, Combine combine) {
  for (int delta = kWarpSize / 2; delta > 0; delta /= 2) value = combine(value, shfl_down(value, delta));
  return value;
}
//! [warp reduce]

//! [group reduce]
// Combines one value per thread of a group of kGroup threads (a warp, or the whole block);
// the group's first thread gets the result. `identity` changes nothing when combined. Every
// thread of the group must call it (a block group synchronises).
template <int kGroup, class V, class Combine>
__device__ V group_reduce(V value, V identity, Combine combine) {
  value = warp_reduce(value, combine);
  if constexpr (kGroup == kWarpSize) {
    return value;
  } else {
    static_assert(kGroup == kBlockSize, "a group is a warp or a block");
    constexpr int kWarps = kBlockSize / kWarpSize;
    __shared__ V partial[kWarps];
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    // Each warp's lane 0 posts its result; after the barrier, warp 0 combines the posts.
    if (lane == 0) partial[warp] = value;
    __syncthreads();
    value = warp_reduce(lane < kWarps ? partial[lane] : identity, combine);
    // The next item reuses `partial`: nobody may overwrite it before warp 0 has read it.
    __syncthreads();
    return value;
  }
}
//! [group reduce]

// The items a group works on, in a grid-stride loop: group g of block b starts at item
// b * groups_per_block + g. Every thread of a group sees the same items.
template <int kGroup>
struct GroupItems {
  static constexpr int kGroupsPerBlock = kBlockSize / kGroup;
  __device__ int64_t first() const { return blockIdx.x * int64_t(kGroupsPerBlock) + threadIdx.x / kGroup; }
  __device__ int64_t stride() const { return int64_t(gridDim.x) * kGroupsPerBlock; }
  __device__ int lane() const { return threadIdx.x % kGroup; }
};

}  // namespace lockstep::cuda
