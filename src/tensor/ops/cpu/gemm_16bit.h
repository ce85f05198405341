/// \file
/// General matrix multiply on 16-bit floating-point operands (f16 or bf16), on the CPU, with
/// f32 sums and an f32 result: what matmul, linear and conv2d run on 16-bit tensors in mixed
/// precision. bf16 goes to the `vdpbf16ps` kernel of gemm_bf16.h where the CPU has it; f16, and
/// bf16 elsewhere, is widened to f32 and multiplied by `cpu::gemm<float>`.
#pragma once

#include <cstdint>

#include "core/half.h"

namespace lockstep::cpu {

/// Computes `C = alpha * A * B + beta * C` where A and B hold 16-bit values of type T (Half or
/// BFloat16) and C floats. The operands are described exactly as for `cpu::gemm`
/// (tensor/ops/cpu/gemm.h), and the same rules hold (`beta == 0` never reads C; `K == 0` or
/// `alpha == 0` reads neither A nor B). Every product of two 16-bit values is exact in f32 and
/// the products are summed in f32, so the result matches `cpu::gemm<float>` on the widened
/// values up to the order of the additions (see gemm_bf16.h for the bf16 kernel's details).
/// The result does not depend on the number of OpenMP threads.
/// Instantiated for Half and BFloat16.
///
/// \param M            Rows of A and C.
/// \param N            Columns of B and C.
/// \param K            Columns of A and rows of B (the summed-over dimension).
/// \param alpha        Scale applied to the product `A * B`.
/// \param A            Pointer to element (0, 0) of A.
/// \param a_row_stride Distance, in elements, between A(i, k) and A(i + 1, k).
/// \param a_col_stride Distance, in elements, between A(i, k) and A(i, k + 1).
/// \param B            Pointer to element (0, 0) of B.
/// \param b_row_stride Distance, in elements, between B(k, j) and B(k + 1, j).
/// \param b_col_stride Distance, in elements, between B(k, j) and B(k, j + 1).
/// \param beta         Scale applied to the old contents of C (0 means "overwrite").
/// \param C            Pointer to element (0, 0) of C.
/// \param c_row_stride Distance, in elements, between C(i, j) and C(i + 1, j); at least N.
template <class T>
void gemm_16bit(int64_t M, int64_t N, int64_t K, float alpha,
                const T* A, int64_t a_row_stride, int64_t a_col_stride,
                const T* B, int64_t b_row_stride, int64_t b_col_stride,
                float beta, float* C, int64_t c_row_stride);

/// The portable path of `gemm_16bit`: widens A and B to f32 (row-major copies) and calls
/// `cpu::gemm<float>`. Same arguments and rules. Instantiated for Half and BFloat16.
template <class T>
void gemm_16bit_via_f32(int64_t M, int64_t N, int64_t K, float alpha,
                        const T* A, int64_t a_row_stride, int64_t a_col_stride,
                        const T* B, int64_t b_row_stride, int64_t b_col_stride,
                        float beta, float* C, int64_t c_row_stride);

}  // namespace lockstep::cpu
