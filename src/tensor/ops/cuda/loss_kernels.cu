// CUDA cross-entropy and nll losses and their backward passes (declared in
// tensor/ops/dispatch/loss_kernels.h). The CPU reference is tensor/ops/cpu/loss_kernels.cpp; as
// there, cross entropy is log_softmax of each row (softmax_lines.cuh: one group of threads per
// row) with the target's entry picked on the way, and every sum is accumulated in double. The
// row losses are averaged by a second kernel on the GPU, with no trip to the CPU. f16 and bf16
// logits, log-probabilities and gradients are read as floats (C = device_opmath_t<T>), every
// step runs in float (double for the sums), and each stored value is rounded to T once.
#include "tensor/ops/dispatch/loss_kernels.h"

#include <cmath>
#include <type_traits>

#include "core/dispatch.h"
#include "tensor/ops/cuda/launch.cuh"
#include "tensor/ops/cuda/softmax_lines.cuh"

namespace lockstep::cuda {

namespace {

// Is `target` a class index of a row of `classes` scores?
__device__ bool class_in_range(int64_t target, int64_t classes) { return target >= 0 && target < classes; }

// Cross entropy's first half: log_probs = log_softmax of each row of the contiguous (N, C)
// logits, one group per row, and row_loss[i] = -log_probs[i, target[i]] (NaN for a target
// outside [0, C)), which the group's first thread computes from the row's max and
// log-normaliser exactly as the stored log_probs entry was computed (for f16 and bf16 before
// that entry was rounded to 16 bits, as on the CPU).
template <int kThreads, class T>
__global__ void cross_entropy_rows(const T* logits, const int64_t* target, int64_t target_stride, T* log_probs,
                                   double* row_loss, int64_t rows, int64_t classes) {
  using C = device_opmath_t<T>;
  using Loop = LineLoop<kThreads>;
  const int rank = Loop::rank();
  for (int64_t row = Loop::first(); row < rows; row += Loop::step()) {
    const T* x = logits + row * classes;
    T* lp = log_probs + row * classes;
    const LineStats<C> st = line_stats<kThreads>(x, classes, 1, rank);
    const C log_s = static_cast<C>(std::log(st.sum));
    for (int64_t j = rank; j < classes; j += kThreads) {
      lp[j] = convert<T>(log_softmax_value(convert<C>(x[j]), st.max, log_s));
    }
    if (rank == 0) {
      const int64_t t = target[row * target_stride];
      row_loss[row] = class_in_range(t, classes)
                          ? -static_cast<double>(log_softmax_value(convert<C>(x[t]), st.max, log_s))
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
    return class_in_range(t, classes) ? -convert<double>(log_probs[i * row_stride + t * class_stride])
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
  sum = group_all_reduce<kBlockSize>(sum, Sum{});
  if (threadIdx.x == 0) *loss = convert<T>(sum / static_cast<double>(rows));
}

// The scale grad / N both losses' gradients share, computed like the CPU's grad.item() / N, in
// the compute type (float for a 16-bit grad).
template <class T, class C = device_opmath_t<T>>
__device__ C loss_grad_scale(const T* grad, int64_t rows) {
  return static_cast<C>(convert<double>(*grad) / static_cast<double>(rows));
}

// The gradient of both losses with respect to their (N, C) input, one thread per element (row
// i = e / C, class j = e % C), all contiguous: scale * (p[i, j] - [j == target[i]]) with
// scale = grad / N, where p = e^log_probs for cross_entropy (the softmax of the logits) and
// p = 0 for nll_loss (log_probs null); NaN in a row whose target is out of range.
template <class T>
__global__ void loss_backward_elements(const T* grad, const T* log_probs, const int64_t* target,
                                       int64_t target_stride, T* grad_input, int64_t rows, int64_t classes) {
  using C = device_opmath_t<T>;
  const C scale = loss_grad_scale(grad, rows);
  const int64_t total = rows * classes;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / classes, j = e % classes;
    const int64_t t = target[i * target_stride];
    C value = log_probs != nullptr ? scale * std::exp(convert<C>(log_probs[e])) : C(0);
    if (j == t) value -= scale;
    grad_input[e] = convert<T>(class_in_range(t, classes) ? value : static_cast<C>(NAN));
  }
}

// Launches the single-block mean of the row losses into the 0-d `loss`.
template <class RowLoss, class T>
void launch_mean_of_rows(RowLoss row_loss, int64_t rows, T* loss, cudaStream_t stream) {
  mean_of_rows<<<1, kBlockSize, 0, stream>>>(row_loss, rows, loss);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void cross_entropy_kernel(const Tensor& logits, const Tensor& target, const Tensor& log_probs, const Tensor& loss) {
  const Device device = log_probs.device();
  const cudaStream_t stream = stream_for(device);
  const Tensor x = logits.contiguous();
  const int64_t rows = x.size(0), classes = x.size(1);
  // One double per row: the row losses, added up by a second kernel (no trip to the CPU).
  const Tensor row_loss = empty({rows}, TensorOptions().dtype(DType::f64).device(device));
  dispatch_floating_and_16bit(x.dtype(), "cross_entropy", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    with_threads_per_line(classes, 1, [&](auto threads) {
      constexpr int kThreads = decltype(threads)::value;
      cross_entropy_rows<kThreads><<<grid_size(rows, LineLoop<kThreads>::kGroupsPerBlock), kBlockSize, 0, stream>>>(
          device_ptr(x.data_ptr<Host>()), target.data_ptr<int64_t>(), target.stride(0),
          device_ptr(log_probs.data_ptr<Host>()), row_loss.data_ptr<double>(), rows, classes);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
    launch_mean_of_rows(StoredRowLoss{row_loss.data_ptr<double>()}, rows, device_ptr(loss.data_ptr<Host>()), stream);
  });
}

void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                   const Tensor& grad_logits) {
  const cudaStream_t stream = stream_for(grad_logits.device());
  const Tensor lp = log_probs.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  dispatch_floating_and_16bit(lp.dtype(), "cross_entropy backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    loss_backward_elements<<<grid_size(rows * classes), kBlockSize, 0, stream>>>(
        device_ptr(grad.data_ptr<Host>()), device_ptr(lp.data_ptr<Host>()), target.data_ptr<int64_t>(),
        target.stride(0), device_ptr(grad_logits.data_ptr<Host>()), rows, classes);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss) {
  const cudaStream_t stream = stream_for(loss.device());
  const int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  dispatch_floating_and_16bit(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using T = device_type_t<Host>;
    // Only one entry per row is read, so log_probs is read in place, whatever its layout.
    const PickedRowLoss<T> row_loss{device_ptr(log_probs.data_ptr<Host>()), log_probs.stride(0), log_probs.stride(1),
                                    target.data_ptr<int64_t>(), target.stride(0), classes};
    launch_mean_of_rows(row_loss, rows, device_ptr(loss.data_ptr<Host>()), stream);
  });
}

void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs) {
  const cudaStream_t stream = stream_for(grad_log_probs.device());
  const int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  dispatch_floating_and_16bit(grad_log_probs.dtype(), "nll_loss backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using T = device_type_t<Host>;
    loss_backward_elements<<<grid_size(rows * classes), kBlockSize, 0, stream>>>(
        device_ptr(grad.data_ptr<Host>()), static_cast<const T*>(nullptr), target.data_ptr<int64_t>(),
        target.stride(0), device_ptr(grad_log_probs.data_ptr<Host>()), rows, classes);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::cuda
