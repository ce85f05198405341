/// \file
/// The optimisers' updates, one pass per parameter on either device: SGD's and Adam's
/// per-element rules (optim/sgd_rule.h, optim/adam_rule.h) applied to n contiguous elements,
/// reading each gradient once and writing each value and state element once, instead of the
/// half-dozen elementwise ops (each a pass and a temporary) that the same update written with
/// tensor arithmetic would take.
///
/// As for the tensor ops' kernels (tensor/ops/dispatch/), each update is declared for both
/// backends with one signature, `cpu::name` (optim/cpu/fused_updates.cpp, a loop) and
/// `cuda::name` (optim/cuda/fused_updates.cu, one kernel launch on the current CUDA device),
/// and `kernels::name<T>` pairs them for the dispatch point. All arrays live on one device and
/// share the dtype T, f32 or f64.
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "optim/adam_rule.h"
#include "optim/sgd_rule.h"
#include "tensor/ops/dispatch/device_kernels.h"

namespace lockstep {

namespace cpu {

/// Applies sgd_rule to elements [0, n) of param, grad and buf (buf may be null without
/// momentum), on several threads for large parameters. Instantiated for float and double.
template <class T>
void sgd_update(int64_t n, T* param, const T* grad, T* buf, const SGDConstants<T>& c);

/// Applies adam_rule to elements [0, n) of param, grad, exp_avg and exp_avg_sq, on several
/// threads for large parameters. Instantiated for float and double.
template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, const AdamConstants<T>& c);

}  // namespace cpu

namespace cuda {

/// cpu::sgd_update<float> on the current CUDA device.
LOCKSTEP_CUDA_FN(void sgd_update(int64_t n, float* param, const float* grad, float* buf,
                                 const SGDConstants<float>& c))
/// cpu::sgd_update<double> on the current CUDA device.
LOCKSTEP_CUDA_FN(void sgd_update(int64_t n, double* param, const double* grad, double* buf,
                                 const SGDConstants<double>& c))
/// cpu::adam_update<float> on the current CUDA device.
LOCKSTEP_CUDA_FN(void adam_update(int64_t n, float* param, const float* grad, float* exp_avg,
                                  float* exp_avg_sq, const AdamConstants<float>& c))
/// cpu::adam_update<double> on the current CUDA device.
LOCKSTEP_CUDA_FN(void adam_update(int64_t n, double* param, const double* grad, double* exp_avg,
                                  double* exp_avg_sq, const AdamConstants<double>& c))

}  // namespace cuda

namespace kernels {

/// SGD's update of one parameter, in element type T (float or double).
template <class T>
inline constexpr auto sgd_update = device_kernels(cpu::sgd_update<T>, cuda::sgd_update);
/// Adam's update of one parameter, in element type T (float or double).
template <class T>
inline constexpr auto adam_update = device_kernels(cpu::adam_update<T>, cuda::adam_update);

}  // namespace kernels

}  // namespace lockstep
