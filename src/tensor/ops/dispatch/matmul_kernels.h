/// \file
/// The batched matrix product behind matmul and linear: one GEMM per matrix of the batch,
/// every operand read through its own strides (a transposed view costs nothing). The CPU
/// multiplies one matrix at a time with cpu::gemm (which spreads a large product over the
/// threads); a GPU multiplies the matrices of the last batch dimension in one cuda::gemm_batched
/// call, and a lone matrix with cuda::gemm.
///
/// Each kernel is declared for both backends with one signature: `cpu::name_kernel` (in
/// tensor/ops/cpu/) and its CUDA twin `cuda::name_kernel` (in tensor/ops/cuda/), which takes the
/// same arguments and gives the same results on the current CUDA device; `kernels::name`
/// pairs them for the dispatch point (device_kernels.h).
#pragma once

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/ops/rules/matrix_batch.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// c[i] = a[i] b[i] + beta * c[i] for every matrix i of the batch `g` describes (see
/// BatchedGemm). a and b share one floating dtype; c is contiguous, of that dtype for f32 and
/// f64, and f32 for f16 and bf16 operands, whose products are summed in f32 (the caller rounds
/// c into a 16-bit result once). `op` names the caller in errors.
void batched_gemm_kernel(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemm& g,
                         double beta);

}  // namespace cpu

namespace cuda {

/// cpu::batched_gemm_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void batched_gemm_kernel(const char* op, const Tensor& a, const Tensor& b, const Tensor& c,
                                          const BatchedGemm& g, double beta))

}  // namespace cuda

namespace kernels {

/// The batched GEMM of matmul and linear.
inline constexpr auto batched_gemm = device_kernels(cpu::batched_gemm_kernel, cuda::batched_gemm_kernel);

}  // namespace kernels

}  // namespace lockstep
