// CUDA max pooling over x: (N, C, H, W) -> out, indices: (N, C, OH, OW) (declared in
// tensor/ops/cuda/pool_kernels.h). The CPU reference is tensor/ops/cpu/pool_kernels.cpp
// (cpu::max_pool2d_kernel / cpu::max_pool2d_backward_kernel), which loops over (n, c) planes; here
// every output element gets its own thread instead, since there are rarely enough planes to
// fill a GPU.
//
// Forward: one thread per output element scans its window, row-major, exactly as the CPU does.
// Backward: one thread per output element adds its gradient to the input element that won its
// window. Where windows overlap (stride < kernel_size) one input element can win several
// windows, so several threads may add to it at once: the adds are atomicAdd (f32, and f64 on
// sm_60 and later). The alternative, one thread per input element gathering from every window
// that covers it, would be deterministic but needs kernel_size, stride and padding, which the
// backward's interface (shared with the CPU kernel) does not carry.
//
// f16 and bf16: the forward compares values as floats (exact) and stores the winner unchanged.
// The backward adds its gradients into an f32 image, rounded into the 16-bit grad_input once at
// the end: 16-bit atomic adds would round after every add, and the sum would depend on the
// order in which the threads arrive.
#include "tensor/ops/cuda/pool_kernels.h"

#include <cmath>
#include <type_traits>

#include "tensor/cuda/copy_kernels.h"
#include "tensor/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/max_rule.h"

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

// grad_input[plane of e, indices[e]] += grad_output[e] for every output element e; one thread
// per output element. grad_output may have any strides (go_at finds element e), grad_input
// (of the compute type C: the f32 image for 16-bit gradients) and indices are contiguous.
template <class T, class C>
__global__ void max_pool2d_backward_elements(const T* grad_output, StridedOffsets<1> go_at, const int64_t* indices,
                                             int64_t out_plane, int64_t in_plane, C* grad_input, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t offset[1];
    go_at.at(e, offset);
    // Overlapping windows may send several gradients to one input element: add atomically.
    atomicAdd(grad_input + e / out_plane * in_plane + indices[e], convert<C>(grad_output[offset[0]]));
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

void max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, const Tensor& grad_input) {
  const cudaStream_t stream = stream_for(grad_input.device());
  const int64_t out_plane = grad_output.size(2) * grad_output.size(3);
  const int64_t in_plane = grad_input.size(2) * grad_input.size(3);
  const int64_t total = grad_output.numel();
  // data_ptr already points at grad_output's first element, hence offset 0.
  const StridedOffsets<1> go_at =
      make_strided_offsets<1>("max_pool2d backward", grad_output.shape(), {grad_output.strides()}, {0});
  dispatch_floating_and_16bit(grad_output.dtype(), "max_pool2d backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using C = opmath_t<Host>;
    constexpr bool wide = std::is_same_v<Host, C>;
    // The sums: grad_input itself for f32 and f64, an f32 image of its shape for 16-bit. It
    // lives until the copy below, queued on the same stream, has read it.
    const Tensor sums =
        wide ? grad_input : empty(grad_input.shape(), grad_input.options().dtype(dtype_of<C>::value));
    // Inputs that won no window get no gradient: start from zeros.
    LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(sums.data_ptr<C>(), 0, sums.numel() * sizeof(C), stream));
    max_pool2d_backward_elements<<<grid_size(total), kBlockSize, 0, stream>>>(
        device_ptr(grad_output.data_ptr<Host>()), go_at, indices.data_ptr<int64_t>(), out_plane, in_plane,
        sums.data_ptr<C>(), total);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
    // Round each 16-bit gradient once.
    if constexpr (!wide) copy_kernel(sums, grad_input);
  });
}

}  // namespace lockstep::cuda
