// CUDA softmax / log_softmax along a dimension, their backward passes, and the cross-entropy
// and nll losses (declared in tensor/ops/cuda/softmax_kernels.h). The CPU reference is
// tensor/ops/cpu/softmax_kernels.cpp (cpu::softmax_kernel and friends); the arithmetic is the same,
// step for step, so the two agree to rounding: the max is subtracted before exponentiating,
// e^(x - m) is computed in the element type, and every sum is accumulated in double.
//
// Softmax works on *lines*: a contiguous tensor viewed as (outer, n, inner) with n the size of
// `dim` has outer * inner lines of n elements, each `inner` apart; line l starts at element
// (l / inner) * n * inner + l % inner. Each line needs two reductions (its max, then its sum
// of e^(x - m)) followed by an elementwise pass, and lines are independent. So a *group* of
// threads owns one line at a time:
//   - 1 thread per line when lines are interleaved in memory (inner > 1: neighbouring threads
//     then read neighbouring addresses) or short (n < 32: a warp would idle);
//   - a warp (32 threads) per line for rows of up to ~1000 elements (e.g. class scores);
//   - a block (256 threads) per line for longer rows.
// Within a group the reductions are warp shuffles, then shared memory across the warps.
#include "tensor/ops/cuda/softmax_kernels.h"

#include <cmath>
#include <type_traits>

#include "tensor/cuda/launch.cuh"
#include "core/dispatch.h"

namespace lockstep::cuda {

namespace {

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
// threads) with `op`; every thread of the group receives the result. The order of
// combination is fixed, so the result is the same on every run. All threads of the group
// must call it (for a block-sized group: the whole block, because of __syncthreads).
template <int kThreads, class A, class Op>
__device__ A group_reduce(A value, Op op) {
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
Lines lines_along(const Shape& shape, int64_t dim) {
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

// What a line's softmax needs: its max m and s = sum_j e^(x_j - m).
template <class T>
struct LineStats {
  T max;
  double sum;
};

// m and s for the line of n elements `stride` apart at x, computed by the group this thread
// (of the given rank) belongs to; every thread of the group receives both.
template <int kThreads, class T>
__device__ LineStats<T> line_stats(const T* x, int64_t n, int64_t stride, int rank) {
  // Each thread scans every kThreads-th element, then the group combines. A NaN needs no
  // care: it makes s NaN, and so the whole line, as on the CPU.
  T m = static_cast<T>(-INFINITY);
  for (int64_t j = rank; j < n; j += kThreads) m = Max{}(m, x[j * stride]);
  m = group_reduce<kThreads>(m, Max{});
  // Every exponent is <= 0, so e^ cannot overflow; the largest term is 1, so s >= 1.
  double s = 0.0;
  for (int64_t j = rank; j < n; j += kThreads) s += std::exp(x[j * stride] - m);
  s = group_reduce<kThreads>(s, Sum{});
  return {m, s};
}

// log_softmax of one element x of a line with max m and log-normaliser log_s = log(s).
template <class T>
__device__ T log_softmax_value(T x, T m, T log_s) {
  return (x - m) - log_s;
}

// Is `target` a class index of a row of `classes` scores?
__device__ bool class_in_range(int64_t target, int64_t classes) { return target >= 0 && target < classes; }

// ---- Kernels -----------------------------------------------------------------------------

// y = softmax(x) or log_softmax(x) along lines of the contiguous x; one group per line.
template <int kThreads, class T>
__global__ void softmax_lines(const T* x, T* y, Lines lines, bool log) {
  using Loop = LineLoop<kThreads>;
  const int rank = Loop::rank();
  for (int64_t line = Loop::first(); line < lines.count; line += Loop::step()) {
    const int64_t start = lines.start(line), stride = lines.inner;
    const LineStats<T> st = line_stats<kThreads>(x + start, lines.n, stride, rank);
    // The elementwise pass: each thread writes the elements it scanned.
    if (log) {
      const T log_s = static_cast<T>(std::log(st.sum));
      for (int64_t j = rank; j < lines.n; j += kThreads) {
        y[start + j * stride] = log_softmax_value(x[start + j * stride], st.max, log_s);
      }
    } else {
      const T inv_s = static_cast<T>(1.0 / st.sum);
      for (int64_t j = rank; j < lines.n; j += kThreads) {
        y[start + j * stride] = std::exp(x[start + j * stride] - st.max) * inv_s;
      }
    }
  }
}

// dx from dy and the saved output y, along lines of the contiguous dy and y; one group per line.
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - e^y * sum(dy)
template <int kThreads, class T>
__global__ void softmax_backward_lines(const T* dy, const T* y, T* dx, Lines lines, bool log) {
  using Loop = LineLoop<kThreads>;
  const int rank = Loop::rank();
  for (int64_t line = Loop::first(); line < lines.count; line += Loop::step()) {
    const int64_t start = lines.start(line), stride = lines.inner;
    // The line's one reduction, accumulated in double like the CPU's.
    double dot = 0.0;
    for (int64_t j = rank; j < lines.n; j += kThreads) {
      const int64_t k = start + j * stride;
      dot += log ? static_cast<double>(dy[k]) : static_cast<double>(dy[k]) * y[k];
    }
    const T total = static_cast<T>(group_reduce<kThreads>(dot, Sum{}));
    for (int64_t j = rank; j < lines.n; j += kThreads) {
      const int64_t k = start + j * stride;
      dx[k] = log ? dy[k] - std::exp(y[k]) * total : y[k] * (dy[k] - total);
    }
  }
}

// Cross entropy's first half: log_probs = log_softmax of each row of the contiguous (N, C)
// logits, one group per row, and row_loss[i] = -log_probs[i, target[i]] (NaN for a target
// outside [0, C)), which the group's first thread computes from the row's max and
// log-normaliser exactly as the stored log_probs entry was computed.
template <int kThreads, class T>
__global__ void cross_entropy_rows(const T* logits, const int64_t* target, int64_t target_stride, T* log_probs,
                                   double* row_loss, int64_t rows, int64_t classes) {
  using Loop = LineLoop<kThreads>;
  const int rank = Loop::rank();
  for (int64_t row = Loop::first(); row < rows; row += Loop::step()) {
    const T* x = logits + row * classes;
    T* lp = log_probs + row * classes;
    const LineStats<T> st = line_stats<kThreads>(x, classes, 1, rank);
    const T log_s = static_cast<T>(std::log(st.sum));
    for (int64_t j = rank; j < classes; j += kThreads) lp[j] = log_softmax_value(x[j], st.max, log_s);
    if (rank == 0) {
      const int64_t t = target[row * target_stride];
      row_loss[row] = class_in_range(t, classes) ? -static_cast<double>(log_softmax_value(x[t], st.max, log_s))
                                                 : static_cast<double>(NAN);
    }
  }
}

// Row i's loss for cross entropy: already computed by cross_entropy_rows.
struct StoredRowLoss {
  const double* row_loss;
  __device__ double operator()(int64_t i) const { return row_loss[i]; }
};

// Row i's loss for nll_loss: -log_probs[i, target[i]] (NaN for a target outside [0, C)), read
// from a (N, C) tensor with strides (row_stride, class_stride).
template <class T>
struct PickedRowLoss {
  const T* log_probs;
  int64_t row_stride, class_stride;
  const int64_t* target;
  int64_t target_stride;
  int64_t classes;
  __device__ double operator()(int64_t i) const {
    const int64_t t = target[i * target_stride];
    return class_in_range(t, classes) ? -static_cast<double>(log_probs[i * row_stride + t * class_stride])
                                      : static_cast<double>(NAN);
  }
};

// loss = mean of row_loss(i) over i in [0, rows), in double, by a single block: the row
// losses are few (one per sample), and one block needs no second pass. 0 rows give NaN, as
// on the CPU (0 / 0).
template <class RowLoss, class T>
__global__ void mean_of_rows(RowLoss row_loss, int64_t rows, T* loss) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) sum += row_loss(i);
  sum = group_reduce<kBlockSize>(sum, Sum{});
  if (threadIdx.x == 0) *loss = static_cast<T>(sum / static_cast<double>(rows));
}

// The scale grad / N both losses' gradients share, computed like the CPU's grad.item() / N.
template <class T>
__device__ T loss_grad_scale(const T* grad, int64_t rows) {
  return static_cast<T>(static_cast<double>(*grad) / static_cast<double>(rows));
}

// grad_logits[i, j] = scale * (e^log_probs[i, j] - [j == target[i]]) with scale = grad / N;
// one thread per element (row i = e / C, class j = e % C), all contiguous (N, C).
template <class T>
__global__ void cross_entropy_backward_elements(const T* grad, const T* log_probs, const int64_t* target,
                                                int64_t target_stride, T* grad_logits, int64_t rows, int64_t classes) {
  const T scale = loss_grad_scale(grad, rows);
  const int64_t total = rows * classes;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / classes, j = e % classes;
    const int64_t t = target[i * target_stride];
    T value = scale * std::exp(log_probs[e]);
    if (j == t) value -= scale;
    grad_logits[e] = class_in_range(t, classes) ? value : static_cast<T>(NAN);
  }
}

// grad_log_probs[i, j] = -grad / N where j == target[i], else 0; one thread per element.
template <class T>
__global__ void nll_loss_backward_elements(const T* grad, const int64_t* target, int64_t target_stride,
                                           T* grad_log_probs, int64_t rows, int64_t classes) {
  const T scale = loss_grad_scale(grad, rows);
  const int64_t total = rows * classes;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / classes, j = e % classes;
    const int64_t t = target[i * target_stride];
    grad_log_probs[e] = !class_in_range(t, classes) ? static_cast<T>(NAN) : j == t ? -scale : T(0);
  }
}

// Launches the single-block mean of the row losses into the 0-d `loss`.
template <class RowLoss, class T>
void launch_mean_of_rows(RowLoss row_loss, int64_t rows, T* loss, cudaStream_t stream) {
  mean_of_rows<<<1, kBlockSize, 0, stream>>>(row_loss, rows, loss);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_kernel(const Tensor& x, int64_t dim, bool log, const Tensor& out) {
  DeviceGuard guard(out.device());
  const cudaStream_t stream = stream_for(out.device());
  // Lines are indexed in the contiguous layout (out's); a strided input is copied once.
  const Tensor in = x.contiguous();
  const Lines lines = lines_along(in.shape(), dim);
  dispatch_floating(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_threads_per_line(lines.n, lines.inner, [&](auto threads) {
      constexpr int kThreads = decltype(threads)::value;
      softmax_lines<kThreads, T><<<grid_size(lines.count, LineLoop<kThreads>::kGroupsPerBlock), kBlockSize, 0,
                                   stream>>>(in.data_ptr<T>(), out.data_ptr<T>(), lines, log);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  });
}

void softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const Tensor& grad_input) {
  DeviceGuard guard(grad_input.device());
  const cudaStream_t stream = stream_for(grad_input.device());
  const Tensor g = grad.contiguous(), y = out.contiguous();
  const Lines lines = lines_along(y.shape(), dim);
  dispatch_floating(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_threads_per_line(lines.n, lines.inner, [&](auto threads) {
      constexpr int kThreads = decltype(threads)::value;
      softmax_backward_lines<kThreads, T><<<grid_size(lines.count, LineLoop<kThreads>::kGroupsPerBlock), kBlockSize,
                                            0, stream>>>(g.data_ptr<T>(), y.data_ptr<T>(), grad_input.data_ptr<T>(),
                                                         lines, log);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  });
}

void cross_entropy_kernel(const Tensor& logits, const Tensor& target, const Tensor& log_probs, const Tensor& loss) {
  const Device device = log_probs.device();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_for(device);
  const Tensor x = logits.contiguous();
  const int64_t rows = x.size(0), classes = x.size(1);
  // One double per row: the row losses, added up by a second kernel (no trip to the CPU).
  const Tensor row_loss = empty({rows}, TensorOptions().dtype(DType::f64).device(device));
  dispatch_floating(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_threads_per_line(classes, 1, [&](auto threads) {
      constexpr int kThreads = decltype(threads)::value;
      cross_entropy_rows<kThreads, T><<<grid_size(rows, LineLoop<kThreads>::kGroupsPerBlock), kBlockSize, 0,
                                        stream>>>(x.data_ptr<T>(), target.data_ptr<int64_t>(), target.stride(0),
                                                  log_probs.data_ptr<T>(), row_loss.data_ptr<double>(), rows, classes);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
    launch_mean_of_rows(StoredRowLoss{row_loss.data_ptr<double>()}, rows, loss.data_ptr<T>(), stream);
  });
}

void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                   const Tensor& grad_logits) {
  DeviceGuard guard(grad_logits.device());
  const cudaStream_t stream = stream_for(grad_logits.device());
  const Tensor lp = log_probs.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  dispatch_floating(lp.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cross_entropy_backward_elements<<<grid_size(rows * classes), kBlockSize, 0, stream>>>(
        grad.data_ptr<T>(), lp.data_ptr<T>(), target.data_ptr<int64_t>(), target.stride(0), grad_logits.data_ptr<T>(),
        rows, classes);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss) {
  DeviceGuard guard(loss.device());
  const cudaStream_t stream = stream_for(loss.device());
  const int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Only one entry per row is read, so log_probs is read in place, whatever its layout.
    const PickedRowLoss<T> row_loss{log_probs.data_ptr<T>(), log_probs.stride(0), log_probs.stride(1),
                                    target.data_ptr<int64_t>(), target.stride(0), classes};
    launch_mean_of_rows(row_loss, rows, loss.data_ptr<T>(), stream);
  });
}

void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs) {
  DeviceGuard guard(grad_log_probs.device());
  const cudaStream_t stream = stream_for(grad_log_probs.device());
  const int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  dispatch_floating(grad_log_probs.dtype(), "nll_loss backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    nll_loss_backward_elements<<<grid_size(rows * classes), kBlockSize, 0, stream>>>(
        grad.data_ptr<T>(), target.data_ptr<int64_t>(), target.stride(0), grad_log_probs.data_ptr<T>(), rows, classes);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::cuda
