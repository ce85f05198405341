// CUDA max along one dimension, remembering where the maximum was, and its backward pass; their CPU
// reference is cpu::max_kernel / cpu::max_backward_kernel (tensor/ops/cpu/max_kernels.cpp), with
// the same rules: ties go to the first position, a NaN is larger than every number.
//   forward:  a: (outer, n, inner) around dim, made contiguous; values, indices: (outer, inner)
//   backward: grad, indices: (outer, inner); grad_input: (outer, n, inner)
// The forward has two decompositions:
// - inner > 1: one thread per output (o, i) walks j = 0 .. n-1. Neighbouring threads take
//   neighbouring i, so each step of the walk reads a contiguous stretch of memory.
// - inner == 1 (each output is the max of a contiguous row, as in max(a) and argmax over the
//   last dimension): row_reduce.cuh's groups of threads, each thread carrying a (value,
//   position) candidate; a long row yields one winner per chunk, and a second pass picks
//   among those winners.
// The backward gives one thread to each element of grad_input, which writes the gradient or 0.
// f16 and bf16 values are compared as floats (C = device_opmath_t<T>; widening is exact, so the
// winner is the CPU's), and the maximum is stored back in the input's dtype, unchanged.
#include <cstdint>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/dispatch/max_kernels.h"
#include "tensor/ops/rules/max_rule.h"
#include "tensor/ops/cuda/row_reduce.cuh"

namespace lockstep::cuda {

namespace {

// A candidate maximum, in the compute type C, and its position along the reduced dimension;
// index -1 means "none yet" (a thread whose share of a short row was empty).
template <class C>
struct Best {
  C value;
  int64_t index;
};

template <class C>
__device__ __forceinline__ Best<C> shfl_down(Best<C> best, int delta) {
  return {cuda::shfl_down(best.value, delta), cuda::shfl_down(best.index, delta)};
}

// The winner of two candidates: the larger, and on a tie (equal values, or two NaNs) the one
// at the earlier position. Candidates from different threads arrive in no particular order,
// so the position has to decide.
struct Pick {
  template <class C>
  __device__ Best<C> operator()(Best<C> x, Best<C> y) const {
    if (y.index < 0) return x;
    if (x.index < 0) return y;
    if (max_beats(y.value, x.value)) return y;
    if (max_beats(x.value, y.value)) return x;
    return y.index < x.index ? y : x;
  }
};

// x: (rows, row_len) dense. positions: null (element i of a row is at position i), or the
// position each element of x stands for (in the second pass x holds the chunk winners).
// values[item], indices[item]: the winner of item (row, chunk) of `split`.
template <int kGroup, class T>
__global__ void max_rows(const T* x, const int64_t* positions, RowSplit split, T* values, int64_t* indices) {
  using C = device_opmath_t<T>;
  const GroupItems<kGroup> group;
  for (int64_t item = group.first(); item < split.items(); item += group.stride()) {
    const int64_t row = item / split.chunks;
    const int64_t begin = (item % split.chunks) * split.chunk_len;
    const int64_t end = begin + split.chunk_len < split.row_len ? begin + split.chunk_len : split.row_len;
    const int64_t base = row * split.row_len;
    // Each thread scans every kGroup-th element in increasing position, so a strict "beats"
    // keeps its earliest maximum; then the group picks among its threads' candidates.
    Best<C> best{C(), -1};
    for (int64_t i = begin + group.lane(); i < end; i += kGroup) {
      const C value = convert<C>(x[base + i]);
      if (best.index < 0 || max_beats(value, best.value)) best = {value, positions ? positions[base + i] : i};
    }
    best = group_reduce<kGroup>(best, Best<C>{C(), -1}, Pick{});
    if (group.lane() == 0) {
      values[item] = convert<T>(best.value);
      indices[item] = best.index;
    }
  }
}

// x: (outer, n, inner) dense with inner > 1; thread k computes output k = (o, i).
template <class T>
__global__ void max_columns(const T* x, int64_t outer, int64_t n, int64_t inner, T* values, int64_t* indices) {
  using C = device_opmath_t<T>;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < outer * inner;
       k += int64_t(gridDim.x) * blockDim.x) {
    const T* column = x + (k / inner) * n * inner + k % inner;
    C best = convert<C>(column[0]);
    int64_t where = 0;
    for (int64_t j = 1; j < n; ++j) {
      const C value = convert<C>(column[j * inner]);
      if (max_beats(value, best)) {
        best = value;
        where = j;
      }
    }
    values[k] = convert<T>(best);
    indices[k] = where;
  }
}

// grad_input[o, j, i] = grad[o, i] where j == indices[o, i], else 0; thread per element.
template <class T>
__global__ void max_backward(int64_t total, int64_t n, int64_t inner, const T* grad, const int64_t* where, T* grad_input) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total; k += int64_t(gridDim.x) * blockDim.x) {
    // k = (o * n + j) * inner + i.
    const int64_t i = k % inner, j = (k / inner) % n, o = k / inner / n;
    const int64_t out = o * inner + i;
    grad_input[k] = where[out] == j ? grad[out] : convert<T>(0);
  }
}

// The winners of the rows of the dense (rows, row_len) block x, into values and indices (rows).
// Rows cut into several chunks first give one winner per chunk, kept in temporary tensors
// (rows, chunks), and then the winner among those.
template <class T>
void max_rows_on(Device device, const T* x, const int64_t* positions, int64_t rows, int64_t row_len, T* values,
                 int64_t* indices) {
  const RowSplit split = split_rows(rows, row_len);
  // The chunk winners live until the second pass, queued on the same stream, has read them.
  Tensor chunk_values, chunk_indices;
  T* first_values = values;
  int64_t* first_indices = indices;
  if (split.chunks > 1) {
    chunk_values = empty({split.items()}, TensorOptions().dtype(device_dtype_v<T>).device(device));
    chunk_indices = empty({split.items()}, TensorOptions().dtype(DType::i64).device(device));
    first_values = static_cast<T*>(chunk_values.data());
    first_indices = chunk_indices.data_ptr<int64_t>();
  }
  launch_groups(split, [&](auto group, unsigned int blocks) {
    max_rows<decltype(group)::value, T><<<blocks, kBlockSize, 0, stream_for(device)>>>(x, positions, split, first_values,
                                                                                       first_indices);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  if (split.chunks > 1) max_rows_on<T>(device, first_values, first_indices, rows, split.chunks, values, indices);
}

// (outer, n, inner) of `shape` around dimension `dim`.
struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
  AroundDim(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      (d < dim ? outer : d == dim ? n : inner) *= shape[d];
    }
  }
};

}  // namespace

void max_kernel(const Tensor& a, int64_t dim, const Tensor& values, const Tensor& indices) {
  const Tensor x = a.contiguous();
  const AroundDim s(x.shape(), dim);
  dispatch_numeric_and_16bit(x.dtype(), "max", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using T = device_type_t<Host>;
    if (s.outer * s.inner == 0) return;
    if (s.inner == 1) {
      max_rows_on<T>(values.device(), device_ptr(x.data_ptr<Host>()), nullptr, s.outer, s.n,
                     device_ptr(values.data_ptr<Host>()), indices.data_ptr<int64_t>());
      return;
    }
    max_columns<T><<<grid_size(s.outer * s.inner), kBlockSize, 0, stream_for(values.device())>>>(
        device_ptr(x.data_ptr<Host>()), s.outer, s.n, s.inner, device_ptr(values.data_ptr<Host>()),
        indices.data_ptr<int64_t>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void max_backward_kernel(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& grad_input) {
  const Tensor g = grad.contiguous(), idx = indices.contiguous();
  const AroundDim s(grad_input.shape(), dim);
  dispatch_floating_and_16bit(grad_input.dtype(), "max backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    const int64_t total = grad_input.numel();
    if (total == 0) return;
    max_backward<<<grid_size(total), kBlockSize, 0, stream_for(grad_input.device())>>>(
        total, s.n, s.inner, device_ptr(g.data_ptr<Host>()), idx.data_ptr<int64_t>(),
        device_ptr(grad_input.data_ptr<Host>()));
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::cuda
