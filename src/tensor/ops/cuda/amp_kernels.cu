// The CUDA kernel of loss scaling's unscale step; its CPU reference is
// cpu::non_finite_check_and_unscale_kernel (tensor/ops/cpu/amp_kernels.cpp), PyTorch's
// `_amp_foreach_non_finite_check_and_unscale_`:
//   g[i] *= inv_scale for every gradient g;  found_inf = 1 if any g[i] was inf or NaN
// One launch per gradient, one thread per element in a grid-stride loop, each element read and
// written once. A thread that sees an inf writes 1 to found_inf: many threads may write at
// once, but all write the same value, so no atomic is needed, and found_inf stays on the GPU
// (the host reads it once per step, not once per gradient). StridedOffsets turns a thread's
// row-major position into the gradient's memory offset, so a gradient of any layout is
// unscaled in place.
#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/dispatch/amp_kernels.h"

namespace lockstep::cuda {

namespace {

template <class T>
__global__ void check_and_unscale_elements(int64_t n, StridedOffsets<1> walk, T* grad, float* found_inf, T inv_scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[1];
    walk.at(i, at);
    const T value = grad[at[0]];
    if (!isfinite(value)) *found_inf = 1.0f;
    grad[at[0]] = value * inv_scale;
  }
}

}  // namespace

void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  for (const Tensor& grad : grads) {
    const int64_t n = grad.numel();
    if (n == 0) continue;
    const auto walk = make_strided_offsets<1>("unscale_", grad.shape(), {grad.strides()}, {grad.offset()});
    dispatch_floating(grad.dtype(), "unscale_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      check_and_unscale_elements<T><<<grid_size(n), kBlockSize, 0, stream_for(grad.device())>>>(
          n, walk, static_cast<T*>(grad.storage()->data()), found_inf.data_ptr<float>(), static_cast<T>(inv_scale));
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }
}

}  // namespace lockstep::cuda
