// ReLU's CUDA kernels (declared in tensor/ops/dispatch/relu_kernels.h). The CPU reference is
// tensor/ops/cpu/relu_kernels.cpp, and both write the mask of tensor/ops/rules/relu_mask.h:
//   forward:  out[i] = relu(x[i]), bit i of the mask = !(x[i] <= 0)
//   backward: grad_input[i] = bit i ? grad_output[i] : 0
// One thread per element. In the forward pass a warp's 32 lanes hold 32 neighbouring elements,
// and __ballot_sync gathers their 32 bits into one word, lane k's bit at position k: the mask's
// layout, which lane 0 stores. f16 and bf16 are compared in float, as on the CPU.
#include "tensor/ops/dispatch/relu_kernels.h"

#include <cstdint>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/rules/elementwise_math.h"

namespace lockstep::cuda {

namespace {

constexpr int kWarp = 32;
static_assert(kBlockSize % kWarp == 0, "a block must hold whole warps, or a ballot would miss lanes");

// x, out: (n) contiguous; mask: (ceil(n / 32)) words.
template <class T>
__global__ void relu_forward_warps(const T* x, T* out, uint32_t* mask, int64_t n) {
  using C = device_opmath_t<T>;
  const UnaryFn<UnaryOp::Relu> relu;
  // Every lane of a warp runs each iteration, past n too (n rounded up to whole warps), since
  // a ballot counts on all 32; the stride is whole warps, so a warp's lanes stay neighbours.
  const int64_t padded = (n + kWarp - 1) / kWarp * kWarp;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < padded; i += int64_t(gridDim.x) * blockDim.x) {
    bool passes = false;
    if (i < n) {
      const C v = convert<C>(x[i]);
      out[i] = convert<T>(relu(v));
      passes = !(v <= C(0));  // positive, or NaN
    }
    const uint32_t bits = __ballot_sync(0xffffffffu, passes);
    if (threadIdx.x % kWarp == 0) mask[i / kWarp] = bits;
  }
}

// g, grad_input: (n) contiguous; mask: bit i of byte i / 8 for element i.
template <class T>
__global__ void relu_backward_elements(const T* g, const uint8_t* mask, T* grad_input, int64_t n) {
  using C = device_opmath_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const bool passes = (mask[i / 8] >> (i % 8)) & 1;
    grad_input[i] = convert<T>(passes ? convert<C>(g[i]) : C(0));
  }
}

}  // namespace

void relu_kernel(const Tensor& input, const Tensor& out, const Tensor& mask) {
  const int64_t n = input.numel();
  if (n == 0) return;
  const cudaStream_t stream = stream_for(out.device());
  const int64_t padded = (n + kWarp - 1) / kWarp * kWarp;
  dispatch_floating_and_16bit(input.dtype(), "relu", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    relu_forward_warps<<<grid_size(padded), kBlockSize, 0, stream>>>(
        device_ptr(input.data_ptr<Host>()), device_ptr(out.data_ptr<Host>()),
        reinterpret_cast<uint32_t*>(mask.data_ptr<uint8_t>()), n);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void relu_backward_kernel(const Tensor& grad_output, const Tensor& mask, const Tensor& grad_input) {
  const int64_t n = grad_output.numel();
  if (n == 0) return;
  const cudaStream_t stream = stream_for(grad_input.device());
  dispatch_floating_and_16bit(grad_output.dtype(), "relu backward", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    relu_backward_elements<<<grid_size(n), kBlockSize, 0, stream>>>(
        device_ptr(grad_output.data_ptr<Host>()), mask.data_ptr<uint8_t>(), device_ptr(grad_input.data_ptr<Host>()),
        n);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::cuda
