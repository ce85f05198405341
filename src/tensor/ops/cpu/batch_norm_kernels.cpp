// CPU batch-norm kernels. Input (N, C) or (N, C, H, W) is read as (N, C, S): channel c owns
// the N runs x[n, c, 0..S). The per-channel reductions run a block of channels per thread and
// sum in double; the elementwise passes share the images out among the threads, with per-channel
// coefficients folded in advance, so each element costs one or two multiply-adds.
//
// A 16-bit input (T = Half or BFloat16) is PyTorch's mixed batch norm: the per-channel tensors
// the kernels return are f32 (their type Stat = opmath_t<T> below, which is T itself for f32
// and f64), and the elementwise passes compute in float and round each output to 16 bits once.
#include "tensor/ops/dispatch/batch_norm_kernels.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "tensor/ops/rules/batch_norm_merge_rule.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

namespace {

// S in the (N, C, S) view of an (N, C) or (N, C, H, W) tensor: H * W, or 1.
int64_t spatial_size(const Tensor& t) {
  int64_t S = 1;
  for (int64_t d = 2; d < t.dim(); ++d) S *= t.size(d);
  return S;
}

// A (C) tensor's values as doubles; an undefined tensor reads as `fallback` in every channel.
std::vector<double> channel_values(const Tensor& t, int64_t C, double fallback) {
  return t.defined() ? t.to_vector<double>() : std::vector<double>(static_cast<size_t>(C), fallback);
}

// The per-channel sums run over a block of up to kChannelBlock channels at once, one
// accumulator each: every channel still adds its values in order of n and then s, so the sums
// are the bits of one channel at a time, but the block's independent chains of additions keep
// the adder busy where a single chain waits for each addition to finish (and for S = 1, the
// small late layers of a ResNet, the block's values lie side by side in memory).
constexpr int64_t kChannelBlock = 8;

// The blocks of channels [0, C): block b is channels [b * kChannelBlock, ... + width).
int64_t channel_blocks(int64_t C) { return (C + kChannelBlock - 1) / kChannelBlock; }
int64_t block_width(int64_t C, int64_t block) { return std::min(kChannelBlock, C - block * kChannelBlock); }

// visit_channel_block for a block of Width channels, Width a constant or the int64_t width.
template <class Width, class Visit>
void visit_block_of(int64_t N, int64_t C, int64_t S, int64_t c0, Width width, Visit visit) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = (n * C + c0) * S;
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t j = 0; j < width; ++j) visit(j, row + j * S + s);
    }
  }
}

// Calls visit(j, i) for channel c0 + j of the block and every flat index i of its values in
// x: (N, C, S), in the order each channel's sums need: n, then s, then the block's channels.
// A whole block has a width known when compiling, so its loop over the channels unrolls and the
// sums stay in registers (for S = 1 they are one vector); a last, narrower block takes the loop.
template <class Visit>
void visit_channel_block(int64_t N, int64_t C, int64_t S, int64_t c0, int64_t width, Visit visit) {
  if (width == kChannelBlock) {
    visit_block_of(N, C, S, c0, std::integral_constant<int64_t, kChannelBlock>(), visit);
  } else {
    visit_block_of(N, C, S, c0, width, visit);
  }
}

// The mean and biased variance over (N, S) of each channel c0 + j of a block (j < width) of
// x: (N, C, S), in double, into mu[j] and var[j]. Two passes, the mean and then squared
// deviations from it, avoid the cancellation that E[x^2] - E[x]^2 suffers when the mean is
// large compared with the spread. No values: 0 and 0.
template <class T>
void channel_block_mean_var(const T* in, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t width, double* mu,
                            double* var) {
  const double count = static_cast<double>(N * S);
  double total[kChannelBlock] = {}, squares[kChannelBlock] = {};
  visit_channel_block(N, C, S, c0, width, [&](int64_t j, int64_t i) { total[j] += static_cast<double>(in[i]); });
  for (int64_t j = 0; j < width; ++j) mu[j] = count > 0 ? total[j] / count : 0.0;
  visit_channel_block(N, C, S, c0, width, [&](int64_t j, int64_t i) {
    const double d = static_cast<double>(in[i]) - mu[j];
    squares[j] += d * d;
  });
  for (int64_t j = 0; j < width; ++j) var[j] = count > 0 ? squares[j] / count : 0.0;
}

// Runs work(n) for every image n of the batch, the images shared out among the threads when
// the tensor (of `numel` values) is large enough to pay for them. Each value is computed alone,
// so how the images are shared out never changes a bit.
template <class Work>
void for_each_image(int64_t N, int64_t numel, Work work) {
#pragma omp parallel for schedule(static) if (numel >= kParallelGrain)
  for (int64_t n = 0; n < N; ++n) work(n);
}

}  // namespace

std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input, double eps) {
  const Tensor x = input.contiguous();  // x: (N, C, S)
  const int64_t N = x.size(0), C = x.size(1), S = spatial_size(x);
  Tensor mean, invstd;  // (C), in the statistics dtype

  dispatch_floating_and_16bit(x.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Stat = opmath_t<T>;
    const auto options = x.options().dtype(dtype_of<Stat>::value);
    mean = empty({C}, options);
    invstd = empty({C}, options);
    const T* in = x.data_ptr<T>();
    Stat* m = mean.data_ptr<Stat>();
    Stat* is = invstd.data_ptr<Stat>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
    for (int64_t block = 0; block < channel_blocks(C); ++block) {
      const int64_t c0 = block * kChannelBlock, width = block_width(C, block);
      double mu[kChannelBlock], var[kChannelBlock];  // biased: what normalisation uses
      channel_block_mean_var(in, N, C, S, c0, width, mu, var);
      for (int64_t j = 0; j < width; ++j) {
        m[c0 + j] = static_cast<Stat>(mu[j]);
        is[c0 + j] = static_cast<Stat>(1.0 / std::sqrt(var[j] + eps));
      }
    }
  });
  return {mean, invstd};
}

Tensor batch_norm_invstd_kernel(const Tensor& var, double eps) {
  const std::vector<double> v = var.to_vector<double>();  // v: (C)
  std::vector<double> invstd(v.size());
  for (size_t c = 0; c < v.size(); ++c) invstd[c] = 1.0 / std::sqrt(v[c] + eps);
  return from_vector(invstd, var.shape(), var.options());
}

void batch_norm_update_stats_kernel(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                                    const Tensor& invstd, double eps, int64_t count, double momentum) {
  const std::vector<double> m = mean.to_vector<double>(), is = invstd.to_vector<double>();  // (C)
  // Normalisation divides by n, but the running variance estimates the population's, so it
  // uses the unbiased n - 1, as PyTorch does.
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);

  dispatch_floating(running_mean.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* rm = running_mean.data_ptr<T>();
    T* rv = running_var.data_ptr<T>();
    const int64_t sm = running_mean.stride(0), sv = running_var.stride(0);
    for (size_t c = 0; c < m.size(); ++c) {
      const double var = 1.0 / (is[c] * is[c]) - eps;  // the biased batch variance, back from invstd
      rm[c * sm] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c * sm]) + momentum * m[c]);
      rv[c * sv] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c * sv]) + momentum * var * unbias);
    }
  });
}

void batch_norm_elemt_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                             const Tensor& bias, const Tensor& out) {
  const Tensor x = input.contiguous();  // x, out: (N, C, S)
  const int64_t N = x.size(0), C = x.size(1), S = spatial_size(x);
  const std::vector<double> m = mean.to_vector<double>(), is = invstd.to_vector<double>();
  const std::vector<double> w = channel_values(weight, C, 1.0), b = channel_values(bias, C, 0.0);

  dispatch_floating_and_16bit(x.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Compute = opmath_t<T>;
    // Fold mean, invstd, weight and bias into y = x * scale + shift, one per channel.
    std::vector<Compute> scale(C), shift(C);
    for (int64_t c = 0; c < C; ++c) {
      scale[c] = static_cast<Compute>(w[c] * is[c]);
      shift[c] = static_cast<Compute>(b[c] - m[c] * w[c] * is[c]);
    }
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    // Image n's values, (C, S): with S = 1 (a ResNet's last stage) the loop runs along the
    // channels, which lie side by side.
    for_each_image(N, x.numel(), [&](int64_t n) {
      const T* image = in + n * C * S;
      T* image_out = o + n * C * S;
      if (S == 1) {
        for (int64_t c = 0; c < C; ++c) image_out[c] = static_cast<T>(static_cast<Compute>(image[c]) * scale[c] + shift[c]);
        return;
      }
      for (int64_t c = 0; c < C; ++c) {
        const Compute a = scale[c], z = shift[c];
        for (int64_t s = 0; s < S; ++s) {
          image_out[c * S + s] = static_cast<T>(static_cast<Compute>(image[c * S + s]) * a + z);
        }
      }
    });
  });
}

std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean) {
  const Tensor g = grad_output.contiguous(), x = input.contiguous();  // g, x: (N, C, S)
  const int64_t N = x.size(0), C = x.size(1), S = spatial_size(x);
  const std::vector<double> m = mean.to_vector<double>();
  Tensor sum_dy, sum_dy_xmu;  // (C), in the statistics dtype

  dispatch_floating_and_16bit(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Stat = opmath_t<T>;
    const auto options = x.options().dtype(dtype_of<Stat>::value);
    sum_dy = empty({C}, options);
    sum_dy_xmu = empty({C}, options);
    const T* dy = g.data_ptr<T>();
    const T* in = x.data_ptr<T>();
    Stat* sdy = sum_dy.data_ptr<Stat>();
    Stat* sdx = sum_dy_xmu.data_ptr<Stat>();
    const double* means = m.data();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
    for (int64_t block = 0; block < channel_blocks(C); ++block) {
      const int64_t c0 = block * kChannelBlock, width = block_width(C, block);
      double a[kChannelBlock] = {}, b[kChannelBlock] = {};
      visit_channel_block(N, C, S, c0, width, [&](int64_t j, int64_t i) {
        const double d = static_cast<double>(dy[i]);
        a[j] += d;
        b[j] += d * (static_cast<double>(in[i]) - means[c0 + j]);
      });
      for (int64_t j = 0; j < width; ++j) {
        sdy[c0 + j] = static_cast<Stat>(a[j]);
        sdx[c0 + j] = static_cast<Stat>(b[j]);
      }
    }
  });
  return {sum_dy, sum_dy_xmu};
}

void batch_norm_backward_elemt_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                      const Tensor& invstd, const Tensor& weight, const Tensor& sum_dy,
                                      const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_input) {
  const Tensor g = grad_output.contiguous(), x = input.contiguous();  // g, x, grad_input: (N, C, S)
  const int64_t N = x.size(0), C = x.size(1), S = spatial_size(x);
  const std::vector<double> m = mean.to_vector<double>(), is = invstd.to_vector<double>();
  const std::vector<double> w = channel_values(weight, C, 1.0);
  const std::vector<double> sdy = sum_dy.to_vector<double>(), sdx = sum_dy_xmu.to_vector<double>();
  const double n = static_cast<double>(count);

  dispatch_floating_and_16bit(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Compute = opmath_t<T>;
    // Per channel: grad_input = k * (dy - mean_dy - (x - mean) * proj), where k = weight *
    // invstd, mean_dy = sum_dy / n and proj = invstd^2 * sum_dy_xmu / n.
    std::vector<Compute> k(C), mean_dy(C), proj(C), mu(C);
    for (int64_t c = 0; c < C; ++c) {
      k[c] = static_cast<Compute>(w[c] * is[c]);
      mean_dy[c] = static_cast<Compute>(sdy[c] / n);
      proj[c] = static_cast<Compute>(is[c] * is[c] * sdx[c] / n);
      mu[c] = static_cast<Compute>(m[c]);
    }
    // Image n's values, (C, S), channel by channel; for S = 1 all its channels in one loop.
    for_each_image(N, x.numel(), [&](int64_t n) {
      const int64_t first = n * C * S;
      const T* dy = g.data_ptr<T>() + first;
      const T* in = x.data_ptr<T>() + first;
      T* dx = grad_input.data_ptr<T>() + first;
      const auto one = [&](int64_t c, int64_t i) {
        const Compute d = static_cast<Compute>(dy[i]), v = static_cast<Compute>(in[i]);
        dx[i] = static_cast<T>(k[c] * (d - mean_dy[c] - (v - mu[c]) * proj[c]));
      };
      if (S == 1) {
        for (int64_t c = 0; c < C; ++c) one(c, c);
        return;
      }
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t s = 0; s < S; ++s) one(c, c * S + s);
      }
    });
  });
}

Tensor batch_norm_local_stats_kernel(const Tensor& input) {
  const Tensor x = input.contiguous();  // x: (N, C, S)
  const int64_t N = x.size(0), C = x.size(1), S = spatial_size(x);
  const int64_t count = N * S;
  std::vector<double> packed(static_cast<size_t>(2 * C + 1));  // [mean (C) | var (C) | count]
  packed[static_cast<size_t>(2 * C)] = static_cast<double>(count);

  dispatch_floating_and_16bit(x.dtype(), "SyncBatchNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data_ptr<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain)
    for (int64_t block = 0; block < channel_blocks(C); ++block) {
      // The same statistics as batch_norm_stats_kernel, kept in double for the merge.
      const int64_t c0 = block * kChannelBlock;
      channel_block_mean_var(in, N, C, S, c0, block_width(C, block), packed.data() + c0, packed.data() + C + c0);
    }
  });
  return from_vector(packed, {2 * C + 1}, x.options().dtype(DType::f64));
}

std::pair<Tensor, Tensor> batch_norm_gather_stats_kernel(const Tensor& gathered, const Tensor& running_mean,
                                                         const Tensor& running_var, double momentum, double eps,
                                                         DType stat_dtype) {
  const int64_t R = gathered.size(0), C = (gathered.size(1) - 1) / 2;
  const std::vector<double> rows = gathered.contiguous().to_vector<double>();  // rows: (R, 2C + 1)
  std::vector<double> mean(static_cast<size_t>(C)), invstd(static_cast<size_t>(C));
  std::vector<double> unbiased_var(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const MergedChannelStats merged = merge_channel_stats(rows.data(), R, C, c);  // Chan et al.
    mean[c] = merged.mean;
    invstd[c] = 1.0 / std::sqrt(merged.var + eps);
    unbiased_var[c] = merged.unbiased_var;
  }

  if (running_mean.defined()) {
    dispatch_floating(running_mean.dtype(), "SyncBatchNorm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* rm = running_mean.data_ptr<T>();
      T* rv = running_var.data_ptr<T>();
      const int64_t sm = running_mean.stride(0), sv = running_var.stride(0);
      for (int64_t c = 0; c < C; ++c) {
        rm[c * sm] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c * sm]) + momentum * mean[c]);
        rv[c * sv] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c * sv]) + momentum * unbiased_var[c]);
      }
    });
  }
  const auto options = gathered.options().dtype(stat_dtype);
  return {from_vector(mean, {C}, options), from_vector(invstd, {C}, options)};
}

}  // namespace lockstep::cpu
