// CUDA max pooling over x: (N, C, H, W) -> out, indices: (N, C, OH, OW) (declared in
// tensor/ops/dispatch/pool_kernels.h). The CPU reference is tensor/ops/cpu/pool_kernels.cpp
// (cpu::max_pool2d_kernel / cpu::max_pool2d_backward_kernel), which loops over (n, c) planes; here
// every element gets its own thread instead, since there are rarely enough planes to fill a GPU.
//
// Forward: one thread per output element scans its window, row-major, exactly as the CPU does.
// Backward: one thread per input element gathers the gradients of the windows that cover it and
// chose it as their maximum. Where windows overlap (stride < kernel_size) one input element can
// win several windows; scattering with atomic adds would sum those shares in whatever order the
// threads arrive, and the weights of a network with overlapping pools (ResNet's stem) would differ
// from run to run. Gathering visits the windows in row-major order, the order in which the CPU
// kernel adds them, so the result is the CPU's, bit for bit, on every run.
//
// f16 and bf16: the forward compares values as floats (exact) and stores the winner unchanged.
// The backward sums an input's shares in float and rounds once, as the CPU does.
#include "tensor/ops/dispatch/pool_kernels.h"

#include <cmath>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/rules/max_rule.h"

namespace lockstep::cuda {

namespace {

// The pooling geometry: planes of H x W inputs and OH x OW outputs, square windows.
struct PoolShape {
  int64_t C, H, W, OH, OW;
  int64_t kernel_size, stride, padding;
};

// An (N, C, H, W) tensor's strides, in elements.
struct Strides4 {
  int64_t n, c, h, w;
};

// out and indices (contiguous (N, C, OH, OW)) from x (any strides); one thread per output.
template <class T>
__global__ void max_pool2d_forward_elements(const T* x, Strides4 xs, PoolShape s, T* out, int64_t* indices,
                                            int64_t total) {
  using C = device_opmath_t<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Split the output's row-major position into (n, c, oh, ow): neighbouring threads take
    // neighbouring ow, so their windows, and reads, are neighbours too.
    const int64_t ow = e % s.OW, oh = e / s.OW % s.OH, c = e / (s.OW * s.OH) % s.C, n = e / (s.OW * s.OH * s.C);
    const T* plane = x + n * xs.n + c * xs.c;
    // The window, clipped to the input: padding holds -inf and can never win, so skip it.
    const int64_t h0 = max(oh * s.stride - s.padding, int64_t{0});
    const int64_t h1 = min(oh * s.stride - s.padding + s.kernel_size, s.H);
    const int64_t w0 = max(ow * s.stride - s.padding, int64_t{0});
    const int64_t w1 = min(ow * s.stride - s.padding + s.kernel_size, s.W);
    // The first of equal maxima wins, and a NaN always wins, so it propagates: pool_max_beats,
    // as on the CPU (and in PyTorch).
    C best = static_cast<C>(-INFINITY);
    int64_t best_index = h0 * s.W + w0;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) {
        const C v = convert<C>(plane[h * xs.h + w * xs.w]);
        if (pool_max_beats(v, best)) {
          best = v;
          best_index = h * s.W + w;
        }
      }
    }
    out[e] = convert<T>(best);
    indices[e] = best_index;
  }
}

// The first and last window along one axis that cover position x of an input of padding
// `padding`: window o covers [o * stride - padding, o * stride - padding + kernel_size), and
// there are `windows` of them.
struct WindowRange {
  int64_t first, last;
};
__device__ WindowRange windows_covering(int64_t x, int64_t kernel_size, int64_t stride, int64_t padding,
                                        int64_t windows) {
  // The first window ends after x: o * stride - padding + kernel_size > x.
  const int64_t after = x + padding - kernel_size + 1;
  const int64_t first = after <= 0 ? 0 : (after + stride - 1) / stride;
  // The last window starts at or before x: o * stride - padding <= x (x + padding >= 0).
  const int64_t last = min((x + padding) / stride, windows - 1);
  return {first, last};
}

// grad_input[e] = the sum of grad_output over the windows that cover input element e and whose
// maximum it was, in row-major window order; one thread per input element. grad_output may have
// any strides (go_at finds its element j); indices and grad_input are contiguous.
template <class T>
__global__ void max_pool2d_backward_gather(const T* grad_output, StridedOffsets<1> go_at, const int64_t* indices,
                                           PoolShape s, T* grad_input, int64_t total) {
  using C = device_opmath_t<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Split the input's row-major position into (plane, h, w); the index a window stores for
    // this element is its position h * W + w inside the plane.
    const int64_t w = e % s.W, h = e / s.W % s.H, plane = e / (s.W * s.H);
    const int64_t here = h * s.W + w;
    const WindowRange rows = windows_covering(h, s.kernel_size, s.stride, s.padding, s.OH);
    const WindowRange cols = windows_covering(w, s.kernel_size, s.stride, s.padding, s.OW);
    // Inputs that won no window get zero.
    C sum = 0;
    for (int64_t oh = rows.first; oh <= rows.last; ++oh) {
      for (int64_t ow = cols.first; ow <= cols.last; ++ow) {
        const int64_t j = (plane * s.OH + oh) * s.OW + ow;
        if (indices[j] != here) continue;
        int64_t offset[1];
        go_at.at(j, offset);
        sum += convert<C>(grad_output[offset[0]]);
      }
    }
    grad_input[e] = convert<T>(sum);
  }
}

}  // namespace

void max_pool2d_kernel(const Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding, const Tensor& out,
                       const Tensor& indices) {
  const cudaStream_t stream = stream_for(out.device());
  const PoolShape s{input.size(1), input.size(2),  input.size(3), out.size(2),
                    out.size(3),   kernel_size,    stride,        padding};
  // The input is read where it lies, through its strides: no contiguous copy.
  const Strides4 xs{input.stride(0), input.stride(1), input.stride(2), input.stride(3)};
  const int64_t total = out.numel();
  dispatch_floating_and_16bit(input.dtype(), "max_pool2d", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    max_pool2d_forward_elements<<<grid_size(total), kBlockSize, 0, stream>>>(
        device_ptr(input.data_ptr<Host>()), xs, s, device_ptr(out.data_ptr<Host>()), indices.data_ptr<int64_t>(),
        total);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, int64_t kernel_size, int64_t stride,
                                int64_t padding, const Tensor& grad_input) {
  const cudaStream_t stream = stream_for(grad_input.device());
  const PoolShape s{grad_input.size(1), grad_input.size(2), grad_input.size(3), grad_output.size(2),
                    grad_output.size(3), kernel_size,        stride,             padding};
  const int64_t total = grad_input.numel();
  // data_ptr already points at grad_output's first element, hence offset 0.
  const StridedOffsets<1> go_at =
      make_strided_offsets<1>("max_pool2d backward", grad_output.shape(), {grad_output.strides()}, {0});
  dispatch_floating_and_16bit(grad_output.dtype(), "max_pool2d backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    max_pool2d_backward_gather<<<grid_size(total), kBlockSize, 0, stream>>>(
        device_ptr(grad_output.data_ptr<Host>()), go_at, indices.data_ptr<int64_t>(), s,
        device_ptr(grad_input.data_ptr<Host>()), total);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::cuda
