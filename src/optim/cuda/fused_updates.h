/// \file
/// The optimisers' updates on a GPU: one kernel launch per parameter applies SGD's or Adam's
/// per-element rule (optim/sgd_rule.h, optim/adam_rule.h, the very functions the CPU loops call)
/// to every element in a single pass, reading each gradient once and writing each value and
/// state element once, instead of the half-dozen elementwise ops (each a kernel and a
/// temporary) that the same update written with tensor arithmetic would take.
///
/// Each function takes the same arguments as its CPU loop in optim/sgd.cpp or optim/adam.cpp:
/// n contiguous elements per array, all on the current CUDA device (the optimiser reaches them
/// through the dispatch point, tensor/ops/kernels/dispatch.h, which makes the parameter's
/// device current) and of one dtype, one overload per dtype (f32, f64).
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "optim/adam_rule.h"
#include "optim/sgd_rule.h"

namespace lockstep::cuda {

/// Applies sgd_rule to elements [0, n) of f32 arrays; `buf` may be null without momentum.
LOCKSTEP_CUDA_FN(void sgd_update(int64_t n, float* param, const float* grad, float* buf,
                                 const SGDConstants<float>& c))
/// Applies sgd_rule to elements [0, n) of f64 arrays; `buf` may be null without momentum.
LOCKSTEP_CUDA_FN(void sgd_update(int64_t n, double* param, const double* grad, double* buf,
                                 const SGDConstants<double>& c))

/// Applies adam_rule to elements [0, n) of f32 arrays.
LOCKSTEP_CUDA_FN(void adam_update(int64_t n, float* param, const float* grad, float* exp_avg,
                                  float* exp_avg_sq, const AdamConstants<float>& c))
/// Applies adam_rule to elements [0, n) of f64 arrays.
LOCKSTEP_CUDA_FN(void adam_update(int64_t n, double* param, const double* grad, double* exp_avg,
                                  double* exp_avg_sq, const AdamConstants<double>& c))

}  // namespace lockstep::cuda
