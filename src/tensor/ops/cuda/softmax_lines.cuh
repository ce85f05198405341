// The plumbing shared by the CUDA kernels that work on softmax *lines* (softmax_kernels.cu,
// loss_kernels.cu): a contiguous tensor viewed as (outer, n, inner) with n the size of `dim`
// has outer * inner lines of n elements, each `inner` apart; line l starts at element
// (l / inner) * n * inner + l % inner. Each line needs two reductions (its max, then its sum
// of e^(x - m)) followed by an elementwise pass, and lines are independent. So a *group* of
// threads owns one line at a time:
//   - 1 thread per line when lines are interleaved in memory (inner > 1: neighbouring threads
//     then read neighbouring addresses) or short (n < 32: a warp would idle);
//   - a warp (32 threads) per line for rows of up to ~1000 elements (e.g. class scores);
//   - a block (256 threads) per line for longer rows.
// Within a group the reductions are warp shuffles, then shared memory across the warps.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/ops/cuda/launch.cuh"

namespace lockstep::cuda {

// ---- Groups of threads that share one line ----------------------------------------------

struct Max {
  template <class A>
  __device__ A operator()(A a, A b) const { return a > b ? a : b; }
};
struct Sum {
  template <class A>
  __device__ A operator()(A a, A b) const { return a + b; }
};

// Combines `value` over the kThreads threads of a group (1, 32 or kBlockSize consecutive
// threads) with `op`; every thread of the group receives the result (row_reduce.cuh's
// group_reduce leaves it with the first thread only). The order of combination is fixed, so
// the result is the same on every run. All threads of the group must call it (for a
// block-sized group: the whole block, because of __syncthreads).
template <int kThreads, class A, class Op>
__device__ A group_all_reduce(A value, Op op) {
  if constexpr (kThreads == 1) {
    return value;
  } else {
    // Within each warp, halve the distance at each step: after 5 steps lane 0 holds the
    // warp's result.
    for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    if constexpr (kThreads == 32) {
      // A warp-sized group: hand lane 0's result to every lane.
      return __shfl_sync(0xffffffffu, value, 0);
    } else {
      static_assert(kThreads == kBlockSize, "a line group is 1 thread, a warp, or a block");
      // A block-sized group: each warp's lane 0 posts its result, then every thread combines
      // the posted results in warp order.
      __shared__ A warp_results[kBlockSize / 32];
      if (threadIdx.x % 32 == 0) warp_results[threadIdx.x / 32] = value;
      __syncthreads();
      A total = warp_results[0];
      for (int w = 1; w < kBlockSize / 32; ++w) total = op(total, warp_results[w]);
      // Nobody may post the next reduction's results before everyone has read these.
      __syncthreads();
      return total;
    }
  }
}

// The lines of a tensor along one dimension (see the top of the file).
struct Lines {
  int64_t count = 0;  // how many lines
  int64_t n = 0;      // elements per line
  int64_t inner = 1;  // distance between a line's consecutive elements

  __device__ int64_t start(int64_t line) const { return line / inner * n * inner + line % inner; }
};

// The lines of a contiguous tensor of `shape` along `dim`; a 0-d tensor is one line of one
// element, an empty tensor has none.
inline Lines lines_along(const Shape& shape, int64_t dim) {
  if (shape.empty()) return {1, 1, 1};
  const int64_t numel = shape_numel(shape);
  const int64_t n = shape[dim];
  const int64_t inner = shape_numel(Shape(shape.begin() + dim + 1, shape.end()));
  return {numel == 0 ? 0 : numel / n, n, inner};
}

// Which group of threads in this block handles which lines: group g of block b takes lines
// b * groups_per_block + g, then strides by the whole grid's groups. Every thread of a group
// sees the same lines, so the group's reductions are always called by all of it.
template <int kThreads>
struct LineLoop {
  static constexpr int kGroupsPerBlock = kBlockSize / kThreads;
  __device__ static int rank() { return static_cast<int>(threadIdx.x % kThreads); }
  __device__ static int64_t first() {
    return static_cast<int64_t>(blockIdx.x) * kGroupsPerBlock + threadIdx.x / kThreads;
  }
  __device__ static int64_t step() { return static_cast<int64_t>(gridDim.x) * kGroupsPerBlock; }
};

// Calls launch(std::integral_constant<int, kThreads>{}) with the group size for lines of n
// elements, `inner` apart (the choice is explained at the top of the file).
template <class Launch>
void with_threads_per_line(int64_t n, int64_t inner, Launch launch) {
  if (inner > 1 || n < 32) {
    launch(std::integral_constant<int, 1>{});
  } else if (n < 1024) {
    launch(std::integral_constant<int, 32>{});
  } else {
    launch(std::integral_constant<int, kBlockSize>{});
  }
}

// ---- One line's softmax ------------------------------------------------------------------
//
// Elements of type T are read as C = device_opmath_t<T>: f32 and f64 compute in their own
// type, f16 and bf16 in float, so that the max, the exponentials and the normalised values are
// those of the CPU kernels, and a 16-bit result is rounded once, when it is stored.

// What a line's softmax needs: its max m and s = sum_j e^(x_j - m), m in the compute type C.
template <class C>
struct LineStats {
  C max;
  double sum;
};

// m and s for the line of n elements `stride` apart at x, computed by the group this thread
// (of the given rank) belongs to; every thread of the group receives both.
template <int kThreads, class T, class C = device_opmath_t<T>>
__device__ LineStats<C> line_stats(const T* x, int64_t n, int64_t stride, int rank) {
  // Each thread scans every kThreads-th element, then the group combines. A NaN needs no
  // care: it makes s NaN, and so the whole line, as on the CPU.
  C m = static_cast<C>(-INFINITY);
  for (int64_t j = rank; j < n; j += kThreads) m = Max{}(m, convert<C>(x[j * stride]));
  m = group_all_reduce<kThreads>(m, Max{});
  // Every exponent is <= 0, so e^ cannot overflow; the largest term is 1, so s >= 1.
  double s = 0.0;
  for (int64_t j = rank; j < n; j += kThreads) s += std::exp(convert<C>(x[j * stride]) - m);
  s = group_all_reduce<kThreads>(s, Sum{});
  return {m, s};
}

// log_softmax of one element x of a line with max m and log-normaliser log_s = log(s), in C.
template <class C>
__device__ C log_softmax_value(C x, C m, C log_s) {
  return (x - m) - log_s;
}

}  // namespace lockstep::cuda
