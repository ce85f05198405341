/// \file
/// General matrix multiply (GEMM) on a CUDA device: the GPU counterpart of tensor/ops/cpu/gemm.h,
/// with the same strided description of the operands. Every CUDA matmul, linear layer and
/// convolution (via im2col) in Lockstep ends up here.
///
/// Two backends compute the same product:
/// - GemmBackend::Cublas (the default): NVIDIA's cuBLAS library, the speed to compare with.
/// - GemmBackend::Tiled: Lockstep's own shared-memory tiled kernel (gemm.cu), written to be
///   read; it shows where cuBLAS's speed comes from, and how much of it a simple kernel reaches
///   (tests/bench/bench_cuda_gemm.cpp measures the ratio).
///
/// The backend is chosen for the whole process: by `set_gemm_backend`, or, until that is
/// called, by the environment variable `LOCKSTEP_GEMM=cublas|tiled`, read at first use.
///
/// f16 and bf16 operands (mixed precision) always go to cuBLAS's tensor-core GEMM, with f32
/// sums and an f32 result, whichever backend is chosen.
#pragma once

#include <cstdint>

#include "core/cuda/api.h"
#include "core/device.h"
#include "core/half.h"

namespace lockstep::cuda {

/// Which implementation computes GEMMs on CUDA devices.
enum class GemmBackend {
  Cublas,  ///< cuBLAS (cublasSgemm / cublasDgemm and their strided-batched forms).
  Tiled,   ///< Lockstep's hand-written shared-memory tiled kernel.
};

/// Selects the GEMM backend for all later CUDA GEMMs of this process (every device, every
/// thread). Work already queued keeps the backend it was queued with.
LOCKSTEP_CUDA_FN(void set_gemm_backend(GemmBackend backend))

/// The GEMM backend in use: the last one set by set_gemm_backend, otherwise the one named by
/// the environment variable `LOCKSTEP_GEMM` (`cublas` or `tiled`; anything else is an error),
/// otherwise GemmBackend::Cublas.
LOCKSTEP_CUDA_FN(GemmBackend gemm_backend())

/// Queues `C = alpha * A * B + beta * C` on the current device's current stream; all three
/// pointers are memory of that device (its callers, the conv2d and batched GEMM kernels, run
/// where the dispatch point made it current). Same operand description and rules as cpu::gemm:
///
/// - A is (M, K): element (i, k) is `A[i * a_row_stride + k * a_col_stride]`.
/// - B is (K, N): element (k, j) is `B[k * b_row_stride + j * b_col_stride]`.
/// - C is (M, N): element (i, j) is `C[i * c_row_stride + j]` (rows are contiguous).
///
/// Any strides work (a transposed view is the same pointer with its strides swapped). When
/// `beta == 0`, C is write-only (it may hold garbage or NaN). When `K == 0` or `alpha == 0`,
/// A and B are not read and the result is `beta * C`. Returns without waiting for the GPU.
///
/// \param M            Rows of A and C.
/// \param N            Columns of B and C.
/// \param K            Columns of A and rows of B (the summed-over dimension).
/// \param alpha        Scale applied to the product `A * B`.
/// \param A            Device pointer to element (0, 0) of A.
/// \param a_row_stride Distance, in elements, between A(i, k) and A(i + 1, k).
/// \param a_col_stride Distance, in elements, between A(i, k) and A(i, k + 1).
/// \param B            Device pointer to element (0, 0) of B.
/// \param b_row_stride Distance, in elements, between B(k, j) and B(k + 1, j).
/// \param b_col_stride Distance, in elements, between B(k, j) and B(k, j + 1).
/// \param beta         Scale applied to the old contents of C (0 means "overwrite").
/// \param C            Device pointer to element (0, 0) of C; must not overlap A or B.
/// \param c_row_stride Distance, in elements, between C(i, j) and C(i + 1, j); at least N.
LOCKSTEP_CUDA_FN(void gemm(int64_t M, int64_t N, int64_t K, float alpha,
                           const float* A, int64_t a_row_stride, int64_t a_col_stride,
                           const float* B, int64_t b_row_stride, int64_t b_col_stride,
                           float beta, float* C, int64_t c_row_stride))

/// gemm for double precision; see the float overload.
LOCKSTEP_CUDA_FN(void gemm(int64_t M, int64_t N, int64_t K, double alpha,
                           const double* A, int64_t a_row_stride, int64_t a_col_stride,
                           const double* B, int64_t b_row_stride, int64_t b_col_stride,
                           double beta, double* C, int64_t c_row_stride))

/// gemm for bf16 operands with f32 sums and an f32 C: the counterpart of cpu::gemm_16bit. It runs
/// on tensor cores through cuBLAS (cublasGemmStridedBatchedEx with CUDA_R_16BF operands, a
/// CUDA_R_32F C and CUBLAS_COMPUTE_32F) whatever the GEMM backend: the tiled kernel has no
/// 16-bit version. Every product of two bf16 values is exact in f32, so the result differs from
/// the f32 GEMM on the widened operands only by the order of the additions.
LOCKSTEP_CUDA_FN(void gemm(int64_t M, int64_t N, int64_t K, float alpha,
                           const BFloat16* A, int64_t a_row_stride, int64_t a_col_stride,
                           const BFloat16* B, int64_t b_row_stride, int64_t b_col_stride,
                           float beta, float* C, int64_t c_row_stride))

/// gemm for f16 operands (CUDA_R_16F) with f32 sums and an f32 C; see the bf16 overload.
LOCKSTEP_CUDA_FN(void gemm(int64_t M, int64_t N, int64_t K, float alpha,
                           const Half* A, int64_t a_row_stride, int64_t a_col_stride,
                           const Half* B, int64_t b_row_stride, int64_t b_col_stride,
                           float beta, float* C, int64_t c_row_stride))

/// `batch` independent GEMMs in one call: for p in [0, batch), matrix p of each operand starts
/// `p * x_batch_stride` elements after the pointer given, and `C_p = alpha * A_p * B_p +
/// beta * C_p` as in gemm. A batch stride of 0 uses the same matrix for every product (a
/// weight shared by all images, say); C's batch stride must keep the products' outputs apart.
/// One launch instead of `batch`, which matters when each product is small.
///
/// \param batch          Number of products.
/// \param M              Rows of every A_p and C_p.
/// \param N              Columns of every B_p and C_p.
/// \param K              Columns of A_p and rows of B_p.
/// \param alpha          Scale applied to every product.
/// \param A              Device pointer to element (0, 0) of A_0.
/// \param a_batch_stride Distance, in elements, between A_p(0, 0) and A_{p+1}(0, 0).
/// \param a_row_stride   Distance between A_p(i, k) and A_p(i + 1, k).
/// \param a_col_stride   Distance between A_p(i, k) and A_p(i, k + 1).
/// \param B              Device pointer to element (0, 0) of B_0.
/// \param b_batch_stride Distance between B_p(0, 0) and B_{p+1}(0, 0).
/// \param b_row_stride   Distance between B_p(k, j) and B_p(k + 1, j).
/// \param b_col_stride   Distance between B_p(k, j) and B_p(k, j + 1).
/// \param beta           Scale applied to the old contents of every C_p.
/// \param C              Device pointer to element (0, 0) of C_0.
/// \param c_batch_stride Distance between C_p(0, 0) and C_{p+1}(0, 0).
/// \param c_row_stride   Distance between C_p(i, j) and C_p(i + 1, j); at least N.
LOCKSTEP_CUDA_FN(void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                                   const float* A, int64_t a_batch_stride, int64_t a_row_stride,
                                   int64_t a_col_stride, const float* B, int64_t b_batch_stride,
                                   int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
                                   int64_t c_batch_stride, int64_t c_row_stride))

/// gemm_batched for double precision; see the float overload.
LOCKSTEP_CUDA_FN(void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                                   const double* A, int64_t a_batch_stride, int64_t a_row_stride,
                                   int64_t a_col_stride, const double* B, int64_t b_batch_stride,
                                   int64_t b_row_stride, int64_t b_col_stride, double beta, double* C,
                                   int64_t c_batch_stride, int64_t c_row_stride))

/// gemm_batched for bf16 operands with f32 sums and an f32 C, on tensor cores through cuBLAS
/// whatever the GEMM backend, as the bf16 gemm.
LOCKSTEP_CUDA_FN(void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                                   const BFloat16* A, int64_t a_batch_stride, int64_t a_row_stride,
                                   int64_t a_col_stride, const BFloat16* B, int64_t b_batch_stride,
                                   int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
                                   int64_t c_batch_stride, int64_t c_row_stride))

/// gemm_batched for f16 operands with f32 sums and an f32 C; see the bf16 overload.
LOCKSTEP_CUDA_FN(void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                                   const Half* A, int64_t a_batch_stride, int64_t a_row_stride,
                                   int64_t a_col_stride, const Half* B, int64_t b_batch_stride,
                                   int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
                                   int64_t c_batch_stride, int64_t c_row_stride))

}  // namespace lockstep::cuda
