// The optimisers' fused updates on a GPU (declared in optim/fused_updates.h). param, grad
// and the state arrays (momentum buffer; exp_avg, exp_avg_sq): n contiguous elements each. The
// CPU references are the loops in optim/cpu/fused_updates.cpp, and the per-element
// arithmetic is literally shared: both call sgd_rule (optim/sgd_rule.h) and adam_rule
// (optim/adam_rule.h), so the GPU matches the CPU up to the rounding of fused multiply-adds.
//
// Decomposition: element i belongs to thread i of a grid-stride loop. The elements are
// independent, so there is nothing to synchronise; each thread reads its gradient and state
// once and writes its value and state once, which makes the update memory-bound by design.
#include "optim/fused_updates.h"

#include "tensor/ops/cuda/launch.cuh"

namespace lockstep::cuda {

namespace {

// Thread i: sgd_rule for element i. `c` travels by value in the kernel's parameters.
template <class T>
__global__ void sgd_elements(int64_t n, T* param, const T* grad, T* buf, SGDConstants<T> c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sgd_rule(i, param, grad, buf, c);
  }
}

// Thread i: adam_rule for element i.
template <class T>
__global__ void adam_elements(int64_t n, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, AdamConstants<T> c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    adam_rule(i, param, grad, exp_avg, exp_avg_sq, c);
  }
}

// Both run on the current device, which the dispatch point (kernels::sgd_update<T>.call and
// kernels::adam_update<T>.call, optim/fused_updates.h) has made the parameter's.
template <class T>
void launch_sgd(int64_t n, T* param, const T* grad, T* buf, const SGDConstants<T>& c) {
  if (n == 0) return;
  sgd_elements<T><<<grid_size(n), kBlockSize, 0, stream_for(current_device())>>>(n, param, grad, buf, c);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_adam(int64_t n, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, const AdamConstants<T>& c) {
  if (n == 0) return;
  adam_elements<T><<<grid_size(n), kBlockSize, 0, stream_for(current_device())>>>(n, param, grad, exp_avg,
                                                                                     exp_avg_sq, c);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sgd_update(int64_t n, float* param, const float* grad, float* buf, const SGDConstants<float>& c) {
  launch_sgd(n, param, grad, buf, c);
}

void sgd_update(int64_t n, double* param, const double* grad, double* buf,
                const SGDConstants<double>& c) {
  launch_sgd(n, param, grad, buf, c);
}

void adam_update(int64_t n, float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                 const AdamConstants<float>& c) {
  launch_adam(n, param, grad, exp_avg, exp_avg_sq, c);
}

void adam_update(int64_t n, double* param, const double* grad, double* exp_avg, double* exp_avg_sq,
                 const AdamConstants<double>& c) {
  launch_adam(n, param, grad, exp_avg, exp_avg_sq, c);
}

}  // namespace lockstep::cuda
