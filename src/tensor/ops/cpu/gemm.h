/// \file
/// General matrix multiply (GEMM) on the CPU: a cache-blocked, packed, OpenMP-parallel
/// implementation in the style of GotoBLAS/BLIS. Every CPU matmul, linear layer and
/// convolution (via im2col) in Lockstep ends up here.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::cpu {

/// Computes `C = alpha * A * B + beta * C` for strided operands.
///
/// The operands are described by a base pointer and strides (in elements), so a
/// transposed view is simply the same pointer with its two strides swapped; packing
/// (see gemm.cpp) makes every layout equally fast.
///
/// - A is (M, K): element (i, k) is `A[i * a_row_stride + k * a_col_stride]`.
/// - B is (K, N): element (k, j) is `B[k * b_row_stride + j * b_col_stride]`.
/// - C is (M, N): element (i, j) is `C[i * c_row_stride + j]` (rows are contiguous).
///
/// When `beta == 0`, C is write-only: it is never read, so it may hold garbage or NaN.
/// When `K == 0` (or `alpha == 0`), A and B are not read and the result is `beta * C`.
/// Large problems run on the OpenMP thread pool (`omp_set_num_threads` decides how many
/// threads), or on the calling thread alone when it is already inside a parallel region;
/// small ones use a simple single-threaded loop. Packing buffers are kept per thread between
/// calls.
/// Instantiated for `float` and `double`.
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
/// \param C            Pointer to element (0, 0) of C; must not overlap A or B.
/// \param c_row_stride Distance, in elements, between C(i, j) and C(i + 1, j); at least N.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha,
          const T* A, int64_t a_row_stride, int64_t a_col_stride,
          const T* B, int64_t b_row_stride, int64_t b_col_stride,
          T beta, T* C, int64_t c_row_stride);

/// The A operand of many products packed once: a convolution's weights, which every image of
/// a batch multiplies. gemm() packs A into MR-row panels on every call (gemm.cpp); packing it
/// here once lets the products that share it skip that step. Made by pack_gemm_a(), read by
/// gemm_packed_a(), and read-only in between, so threads may share one.
///
/// It also keeps A itself (the pointer and strides, which must stay valid): where gemm() would
/// take another path for a product (a small one, or one computed as C^T = B^T A^T),
/// gemm_packed_a() takes it too, so its results are gemm()'s, bit for bit.
template <class T>
struct PackedGemmA {
  int64_t M = 0;            ///< Rows of A.
  int64_t K = 0;            ///< Columns of A.
  const T* A = nullptr;     ///< A's element (0, 0).
  int64_t row_stride = 0;   ///< Distance between A(i, k) and A(i + 1, k), as gemm() takes it.
  int64_t col_stride = 0;   ///< Distance between A(i, k) and A(i, k + 1).
  std::vector<T> panels;    ///< A in gemm's packed layout, slice by slice of K.
};

/// Packs the (M, K) matrix A (element (i, k) at `A[i * a_row_stride + k * a_col_stride]`) for
/// gemm_packed_a(). Instantiated for `float` and `double`.
template <class T>
PackedGemmA<T> pack_gemm_a(int64_t M, int64_t K, const T* A, int64_t a_row_stride, int64_t a_col_stride);

/// `C = alpha * A * B + beta * C` with A packed by pack_gemm_a(): the same operands, threads and
/// results as gemm() with A's pointer and strides, without packing A again.
template <class T>
void gemm_packed_a(const PackedGemmA<T>& A, int64_t N, T alpha, const T* B, int64_t b_row_stride,
                   int64_t b_col_stride, T beta, T* C, int64_t c_row_stride);

}  // namespace lockstep::cpu
