// CUDA batch normalisation (declared in tensor/ops/dispatch/batch_norm_kernels.h). The CPU reference is
// tensor/ops/cpu/batch_norm_kernels.cpp (cpu::batch_norm_stats_kernel and friends), whose
// arithmetic this follows step for step: per-channel sums in double, per-channel coefficients
// folded in double and rounded to the element type once, then one or two multiply-adds per element.
//
// Two element types: T for input, grad_output, out and grad_input, and P = device_opmath_t<T>
// for the per-channel tensors (statistics, weight, bias, sums) and the arithmetic. They are the
// same for f32 and f64; a 16-bit T has f32 per-channel tensors (PyTorch's mixed batch norm),
// its elements are widened to float, and each output element is rounded to 16 bits once.
//
// x: (N, C, S), contiguous, S = H * W (1 for 2-D input). Channel c owns the N * S elements
// x[n, c, s], numbered j = n * S + s; element j of channel c sits at (n * C + c) * S + s.
// Parallel decomposition:
//   - per-channel reductions (stats, local_stats, backward_reduce): one block per channel. Its threads
//     stride over j, so neighbouring threads read neighbouring s (coalesced when S is large;
//     2-D input reads one element every C), and combine their double partial sums with warp
//     shuffles, then through shared memory across the warps;
//   - per-channel arithmetic (invstd, running statistics, folded coefficients, SyncBatchNorm's
//     merge of the ranks' statistics): one thread per channel;
//   - elementwise passes: a grid-stride loop, one element i per thread, channel (i / S) % C.
#include "tensor/ops/dispatch/batch_norm_kernels.h"

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/rules/batch_norm_merge_rule.h"

namespace lockstep::cuda {

namespace {

// Threads per channel in the reductions: a channel often holds 10^4 to 10^6 values, and more
// threads per block keep more loads in flight while only C blocks run.
constexpr int kReduceThreads = 512;

// The (N, C, S) view of an (N, C) or (N, C, H, W) tensor.
struct ChannelLayout {
  int64_t N = 0, C = 0, S = 1;
};

ChannelLayout channel_layout(const Tensor& t) {
  ChannelLayout layout{t.size(0), t.size(1), 1};
  for (int64_t d = 2; d < t.dim(); ++d) layout.S *= t.size(d);
  return layout;
}

// Where element j = n * S + s of channel c lives in a contiguous (N, C, S) tensor.
__device__ __forceinline__ int64_t channel_offset(int64_t j, int64_t c, const ChannelLayout& l) {
  const int64_t n = j / l.S;
  return (n * l.C + c) * l.S + (j - n * l.S);
}

// The sum of `value` over the kReduceThreads threads of the block, received by every thread.
// The warps' results are combined in a fixed order, so every run gives the same bits. All
// threads of the block must call it.
__device__ double block_sum(double value) {
  // Within each warp, halve the distance at each step: after 5 steps lane 0 holds the warp's sum.
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  // Lane 0 of each warp posts its sum; after the barrier every thread adds the posted sums.
  __shared__ double warp_sums[kReduceThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kReduceThreads / 32; ++w) total += warp_sums[w];
  // No thread may post the next call's sums before every thread has read these.
  __syncthreads();
  return total;
}

// Channel c's mean and biased variance, in double, summed by the whole block (block c) in two
// passes like cpu::batch_norm_stats_kernel: the mean, then squared deviations from it, which
// avoids E[x^2] - E[x]^2's cancellation. Every thread of the block gets the result.
template <class T>
__device__ void block_channel_mean_var(const T* x, ChannelLayout l, int64_t c, double& mu, double& var) {
  const int64_t count = l.N * l.S;
  double total = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) total += convert<double>(x[channel_offset(j, c, l)]);
  total = block_sum(total);
  mu = count > 0 ? total / static_cast<double>(count) : 0.0;

  double squares = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const double d = convert<double>(x[channel_offset(j, c, l)]) - mu;
    squares += d * d;
  }
  squares = block_sum(squares);
  var = count > 0 ? squares / static_cast<double>(count) : 0.0;
}

// Block c: mean[c] and invstd[c] of channel c (block_channel_mean_var).
template <class T, class P>
__global__ void channel_stats(const T* x, ChannelLayout l, double eps, P* mean, P* invstd) {
  const int64_t c = blockIdx.x;
  double mu = 0.0, var = 0.0;  // var: biased
  block_channel_mean_var(x, l, c, mu, var);
  if (threadIdx.x == 0) {
    mean[c] = static_cast<P>(mu);
    invstd[c] = static_cast<P>(1.0 / sqrt(var + eps));
  }
}

// Thread c: invstd[c] = 1 / sqrt(var[c] + eps), in double.
template <class P>
__global__ void channel_invstd(const P* var, int64_t C, double eps, P* invstd) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    invstd[c] = static_cast<P>(1.0 / sqrt(static_cast<double>(var[c]) + eps));
  }
}

// Thread c: the running mean and the unbiased running variance of channel c move a fraction
// `momentum` towards the batch's, in double. The running tensors may be strided.
template <class P>
__global__ void update_running_stats(P* running_mean, int64_t mean_stride, P* running_var, int64_t var_stride,
                                    const P* mean, const P* invstd, int64_t C, double eps, double unbias,
                                    double momentum) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double is = static_cast<double>(invstd[c]);
    const double var = 1.0 / (is * is) - eps;  // the biased batch variance, back from invstd
    P& rm = running_mean[c * mean_stride];
    P& rv = running_var[c * var_stride];
    rm = static_cast<P>((1.0 - momentum) * static_cast<double>(rm) + momentum * static_cast<double>(mean[c]));
    rv = static_cast<P>((1.0 - momentum) * static_cast<double>(rv) + momentum * var * unbias);
  }
}

// Thread c: folds mean, invstd, weight and bias into y = x * scale + shift for channel c.
// coefficients: (2, C), rows scale and shift. A null weight means 1, a null bias 0.
template <class P>
__global__ void fold_affine(const P* mean, const P* invstd, const P* weight, const P* bias, int64_t C,
                                   P* coefficients) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double m = static_cast<double>(mean[c]), is = static_cast<double>(invstd[c]);
    const double w = weight != nullptr ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias != nullptr ? static_cast<double>(bias[c]) : 0.0;
    coefficients[c] = static_cast<P>(w * is);
    coefficients[C + c] = static_cast<P>(b - m * w * is);
  }
}

// Thread i: out[i] = x[i] * scale[c] + shift[c] for element i of channel c, in P.
template <class T, class P>
__global__ void affine_elements(const T* x, const P* coefficients, int64_t total, ChannelLayout l, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i / l.S % l.C;
    out[i] = convert<T>(convert<P>(x[i]) * coefficients[c] + coefficients[l.C + c]);
  }
}

// Block c: sum_dy[c] = sum of dy and sum_dy_xmu[c] = sum of dy * (x - mean[c]) over channel c.
template <class T, class P>
__global__ void channel_backward_sums(const T* dy, const T* x, const P* mean, ChannelLayout l, P* sum_dy,
                                       P* sum_dy_xmu) {
  const int64_t c = blockIdx.x, count = l.N * l.S;
  const double m = static_cast<double>(mean[c]);
  double a = 0.0, b = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t o = channel_offset(j, c, l);
    const double d = convert<double>(dy[o]);
    a += d;
    b += d * (convert<double>(x[o]) - m);
  }
  a = block_sum(a);
  b = block_sum(b);
  if (threadIdx.x == 0) {
    sum_dy[c] = static_cast<P>(a);
    sum_dy_xmu[c] = static_cast<P>(b);
  }
}

// Thread c: the backward pass's per-channel coefficients, as in
// cpu::batch_norm_backward_elemt_kernel: k = weight * invstd, mean_dy = sum_dy / n, proj = invstd^2
// * sum_dy_xmu / n and mu = mean. coefficients: (4, C), one row each. A null weight means 1.
template <class P>
__global__ void fold_backward(const P* mean, const P* invstd, const P* weight, const P* sum_dy,
                                     const P* sum_dy_xmu, int64_t C, double n, P* coefficients) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double is = static_cast<double>(invstd[c]);
    const double w = weight != nullptr ? static_cast<double>(weight[c]) : 1.0;
    coefficients[c] = static_cast<P>(w * is);
    coefficients[C + c] = static_cast<P>(static_cast<double>(sum_dy[c]) / n);
    coefficients[2 * C + c] = static_cast<P>(is * is * static_cast<double>(sum_dy_xmu[c]) / n);
    coefficients[3 * C + c] = mean[c];
  }
}

// Thread i: dx[i] = k * (dy[i] - mean_dy - (x[i] - mu) * proj) for element i of channel c, in P.
template <class T, class P>
__global__ void backward_elements(const T* dy, const T* x, const P* coefficients, int64_t total, ChannelLayout l,
                                      T* dx) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i / l.S % l.C;
    const P k = coefficients[c], mean_dy = coefficients[l.C + c];
    const P proj = coefficients[2 * l.C + c], mu = coefficients[3 * l.C + c];
    dx[i] = convert<T>(k * (convert<P>(dy[i]) - mean_dy - (convert<P>(x[i]) - mu) * proj));
  }
}

// Block c: SyncBatchNorm's packed row for channel c, packed[c] = mean and packed[C + c] = the
// biased variance (block_channel_mean_var); block 0 also writes packed[2C] = count.
template <class T>
__global__ void channel_local_stats(const T* x, ChannelLayout l, double* packed) {
  const int64_t c = blockIdx.x;
  double mu = 0.0, var = 0.0;
  block_channel_mean_var(x, l, c, mu, var);
  if (threadIdx.x == 0) {
    packed[c] = mu;
    packed[l.C + c] = var;
    if (c == 0) packed[2 * l.C] = static_cast<double>(l.N * l.S);
  }
}

// Thread c: merges the R ranks' rows of `rows` (R, 2C + 1) for channel c with the rule that
// cpu::batch_norm_gather_stats_kernel calls too (merge_channel_stats: Chan et al.'s update of
// mean and M2 in double, in rank order, rows of count 0 skipped), writes mean[c] and invstd[c],
// and moves the running statistics, when given (non-null, possibly strided), towards the global
// mean and unbiased variance.
template <class P>
__global__ void merge_rank_stats(const double* rows, int64_t R, int64_t C, double eps, double momentum,
                                 P* running_mean, int64_t mean_stride, P* running_var, int64_t var_stride,
                                 P* mean, P* invstd) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const MergedChannelStats merged = merge_channel_stats(rows, R, C, c);
    mean[c] = static_cast<P>(merged.mean);
    invstd[c] = static_cast<P>(1.0 / sqrt(merged.var + eps));
    if (running_mean != nullptr) {
      P& rm = running_mean[c * mean_stride];
      P& rv = running_var[c * var_stride];
      rm = static_cast<P>((1.0 - momentum) * static_cast<double>(rm) + momentum * merged.mean);
      rv = static_cast<P>((1.0 - momentum) * static_cast<double>(rv) + momentum * merged.unbiased_var);
    }
  }
}

// The typed address of an optional tensor's data: null for an undefined tensor.
template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// A contiguous version of an optional per-channel tensor (undefined stays undefined).
Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : Tensor(); }

// The options of the per-channel tensors for input x: x's, with the dtype of opmath_t (f32 for
// a 16-bit x).
TensorOptions per_channel_options(const Tensor& x) {
  return x.options().dtype(dispatch_floating_and_16bit(x.dtype(), "batch_norm", [](auto tag) {
    return dtype_of<opmath_t<typename decltype(tag)::type>>::value;
  }));
}

}  // namespace

std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input, double eps) {
  const Tensor x = input.contiguous();  // x: (N, C, S)
  const ChannelLayout l = channel_layout(x);
  const auto options = per_channel_options(x);
  Tensor mean = empty({l.C}, options), invstd = empty({l.C}, options);
  if (l.C == 0) return {mean, invstd};
  dispatch_floating_and_16bit(x.dtype(), "batch_norm", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using P = opmath_t<Host>;
    channel_stats<<<static_cast<unsigned int>(l.C), kReduceThreads, 0, stream_for(x.device())>>>(
        device_ptr(x.data_ptr<Host>()), l, eps, mean.data_ptr<P>(), invstd.data_ptr<P>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  return {mean, invstd};
}

Tensor batch_norm_invstd_kernel(const Tensor& var, double eps) {
  const Tensor v = var.contiguous();  // v: (C)
  Tensor invstd = empty(v.shape(), v.options());
  const int64_t C = v.numel();
  if (C == 0) return invstd;
  dispatch_floating(v.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    channel_invstd<T><<<grid_size(C), kBlockSize, 0, stream_for(v.device())>>>(v.data_ptr<T>(), C, eps,
                                                                               invstd.data_ptr<T>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  return invstd;
}

void batch_norm_update_stats_kernel(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                                    const Tensor& invstd, double eps, int64_t count, double momentum) {
  const Tensor m = mean.contiguous(), is = invstd.contiguous();  // (C)
  const int64_t C = m.numel();
  if (C == 0) return;
  // Normalisation divides by n, but the running variance estimates the population's, so it
  // uses the unbiased n - 1, as PyTorch does.
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  dispatch_floating(running_mean.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    update_running_stats<T><<<grid_size(C), kBlockSize, 0, stream_for(running_mean.device())>>>(
        running_mean.data_ptr<T>(), running_mean.stride(0), running_var.data_ptr<T>(), running_var.stride(0),
        m.data_ptr<T>(), is.data_ptr<T>(), C, eps, unbias, momentum);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_elemt_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                             const Tensor& bias, const Tensor& out) {
  const Tensor x = input.contiguous();  // x, out: (N, C, S)
  const ChannelLayout l = channel_layout(x);
  const int64_t total = x.numel();
  if (total == 0) return;
  const Tensor m = mean.contiguous(), is = invstd.contiguous();
  const Tensor w = contiguous_or_undefined(weight), b = contiguous_or_undefined(bias);
  Tensor coefficients = empty({2, l.C}, per_channel_options(x));
  const cudaStream_t stream = stream_for(x.device());
  dispatch_floating_and_16bit(x.dtype(), "batch_norm", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using P = opmath_t<Host>;
    // First fold the per-channel numbers into (scale, shift), then one multiply-add per element.
    fold_affine<P><<<grid_size(l.C), kBlockSize, 0, stream>>>(
        m.data_ptr<P>(), is.data_ptr<P>(), data_or_null<P>(w), data_or_null<P>(b), l.C, coefficients.data_ptr<P>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
    affine_elements<<<grid_size(total), kBlockSize, 0, stream>>>(
        device_ptr(x.data_ptr<Host>()), coefficients.data_ptr<P>(), total, l, device_ptr(out.data_ptr<Host>()));
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean) {
  const Tensor g = grad_output.contiguous(), x = input.contiguous();  // g, x: (N, C, S)
  const Tensor m = mean.contiguous();
  const ChannelLayout l = channel_layout(x);
  const auto options = per_channel_options(x);
  Tensor sum_dy = empty({l.C}, options), sum_dy_xmu = empty({l.C}, options);
  if (l.C == 0) return {sum_dy, sum_dy_xmu};
  dispatch_floating_and_16bit(x.dtype(), "batch_norm backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using P = opmath_t<Host>;
    channel_backward_sums<<<static_cast<unsigned int>(l.C), kReduceThreads, 0, stream_for(x.device())>>>(
        device_ptr(g.data_ptr<Host>()), device_ptr(x.data_ptr<Host>()), m.data_ptr<P>(), l, sum_dy.data_ptr<P>(),
        sum_dy_xmu.data_ptr<P>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  return {sum_dy, sum_dy_xmu};
}

void batch_norm_backward_elemt_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                      const Tensor& invstd, const Tensor& weight, const Tensor& sum_dy,
                                      const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_input) {
  const Tensor g = grad_output.contiguous(), x = input.contiguous();  // g, x, grad_input: (N, C, S)
  const ChannelLayout l = channel_layout(x);
  const int64_t total = x.numel();
  if (total == 0) return;
  const Tensor m = mean.contiguous(), is = invstd.contiguous(), w = contiguous_or_undefined(weight);
  const Tensor sdy = sum_dy.contiguous(), sdx = sum_dy_xmu.contiguous();
  Tensor coefficients = empty({4, l.C}, per_channel_options(x));
  const cudaStream_t stream = stream_for(x.device());
  dispatch_floating_and_16bit(x.dtype(), "batch_norm backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using P = opmath_t<Host>;
    // First the per-channel coefficients, then two multiply-adds and a multiply per element.
    fold_backward<P><<<grid_size(l.C), kBlockSize, 0, stream>>>(
        m.data_ptr<P>(), is.data_ptr<P>(), data_or_null<P>(w), sdy.data_ptr<P>(), sdx.data_ptr<P>(), l.C,
        static_cast<double>(count), coefficients.data_ptr<P>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
    backward_elements<<<grid_size(total), kBlockSize, 0, stream>>>(
        device_ptr(g.data_ptr<Host>()), device_ptr(x.data_ptr<Host>()), coefficients.data_ptr<P>(), total, l,
        device_ptr(grad_input.data_ptr<Host>()));
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

Tensor batch_norm_local_stats_kernel(const Tensor& input) {
  const Tensor x = input.contiguous();  // x: (N, C, S)
  const ChannelLayout l = channel_layout(x);
  Tensor packed = empty({2 * l.C + 1}, x.options().dtype(DType::f64));  // [mean (C) | var (C) | count]
  if (l.C == 0) {
    packed.fill_(0.0);  // just the count, 0 values
    return packed;
  }
  dispatch_floating_and_16bit(x.dtype(), "SyncBatchNorm", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    channel_local_stats<<<static_cast<unsigned int>(l.C), kReduceThreads, 0, stream_for(x.device())>>>(
        device_ptr(x.data_ptr<Host>()), l, packed.data_ptr<double>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  return packed;
}

std::pair<Tensor, Tensor> batch_norm_gather_stats_kernel(const Tensor& gathered, const Tensor& running_mean,
                                                         const Tensor& running_var, double momentum, double eps,
                                                         DType stat_dtype) {
  const Tensor rows = gathered.contiguous();  // rows: (R, 2C + 1)
  const int64_t R = rows.size(0), C = (rows.size(1) - 1) / 2;
  const auto options = rows.options().dtype(stat_dtype);
  Tensor mean = empty({C}, options), invstd = empty({C}, options);
  if (C == 0) return {mean, invstd};
  dispatch_floating(stat_dtype, "SyncBatchNorm", [&](auto tag) {
    using P = typename decltype(tag)::type;
    const bool running = running_mean.defined();
    merge_rank_stats<P><<<grid_size(C), kBlockSize, 0, stream_for(rows.device())>>>(
        rows.data_ptr<double>(), R, C, eps, momentum, running ? running_mean.data_ptr<P>() : nullptr,
        running ? running_mean.stride(0) : 0, running ? running_var.data_ptr<P>() : nullptr,
        running ? running_var.stride(0) : 0, mean.data_ptr<P>(), invstd.data_ptr<P>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  return {mean, invstd};
}

}  // namespace lockstep::cuda
