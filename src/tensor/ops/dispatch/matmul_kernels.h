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

#include <cstdint>

#include "core/cuda/api.h"
#include "tensor/ops/dispatch/device_kernels.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cpu {

/// out[i] = a[i] b[i] + beta * out[i] for every matrix i of out (batch..., M, N), contiguous.
/// a is walked with `a_strides` as if it had shape (batch..., M, K), b with `b_strides` as
/// (batch..., K, N): a stride of 0 repeats one matrix over a broadcast batch dimension. a, b
/// and out share one floating dtype; f16 and bf16 products are summed in f32 (in an f32 copy
/// of out) and rounded to out's dtype once at the end. `op` names the caller in errors.
void batched_gemm_kernel(const char* op, const Tensor& a, const Shape& a_strides, const Tensor& b,
                         const Shape& b_strides, int64_t K, const Tensor& out, double beta);

}  // namespace cpu

namespace cuda {

/// cpu::batched_gemm_kernel on the current CUDA device.
LOCKSTEP_CUDA_FN(void batched_gemm_kernel(const char* op, const Tensor& a, const Shape& a_strides, const Tensor& b,
                                          const Shape& b_strides, int64_t K, const Tensor& out, double beta))

}  // namespace cuda

namespace kernels {

/// The batched GEMM of matmul and linear.
inline constexpr auto batched_gemm = device_kernels(cpu::batched_gemm_kernel, cuda::batched_gemm_kernel);

}  // namespace kernels

}  // namespace lockstep
