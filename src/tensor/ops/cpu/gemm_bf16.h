/// \file
/// General matrix multiply on bfloat16 operands, on the CPU: bf16 inputs, f32 sums, f32 output.
/// It is the bf16 path for matmul, linear layers and convolutions in mixed precision. On a CPU
/// with the AVX-512 BF16 instructions it multiplies pairs of bf16 values with `vdpbf16ps`;
/// elsewhere it widens the operands to f32 and calls `cpu::gemm` (`gemm_16bit_via_f32`, which tests
/// and benchmarks call directly to check and time that path on any machine).
/// `gemm_bf16_path()` names the path this CPU takes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/half.h"

namespace lockstep::cpu {

/// The kernels `gemm_bf16` can run, fastest first.
enum class GemmBf16Path {
  amx_bf16,     ///< AMX tiles, `tdpbf16ps`: Intel Xeon since Sapphire Rapids, under Linux 5.16 or later.
  avx512_bf16,  ///< AVX-512 BF16, `vdpbf16ps`: AMD Zen 4 and later, Intel Xeon since Cooper Lake.
  f32_fallback  ///< The operands widened to f32 and multiplied by `cpu::gemm<float>`: any CPU.
};

/// Computes `C = alpha * A * B + beta * C` where A and B hold bfloat16 values and C floats.
///
/// The operands are described exactly as for `cpu::gemm` (tensor/ops/cpu/gemm.h), and the same
/// rules hold: A(i, k) is `A[i * a_row_stride + k * a_col_stride]`, B(k, j) is
/// `B[k * b_row_stride + j * b_col_stride]`, C(i, j) is `C[i * c_row_stride + j]`; with
/// `beta == 0` C is never read (it may hold NaN); with `K == 0` or `alpha == 0` A and B are not
/// read and the result is `beta * C`. Every product of two bf16 values is exact in f32, and the
/// products are summed in f32, so the result differs from `cpu::gemm<float>` on the same
/// values (widened to f32) by the order of the additions, by where alpha is applied (once per
/// K slice), and, on the AMX and vdpbf16ps paths, by denormal inputs, products and sums, which
/// those instructions flush to zero. The paths differ from each other in the same ways, so a
/// bf16 result's last bits depend on the CPU.
/// The result does not depend on the number of OpenMP threads.
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
void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha,
               const BFloat16* A, int64_t a_row_stride, int64_t a_col_stride,
               const BFloat16* B, int64_t b_row_stride, int64_t b_col_stride,
               float beta, float* C, int64_t c_row_stride);

/// A bf16 operand A of many products packed once: a convolution's weights, which every image's
/// patches multiply. `gemm_bf16` packs A into pair words on every call (gemm_bf16_pairs.h);
/// packing it here once, for the path this CPU takes, lets the products that share it skip that
/// step. Made by pack_gemm_bf16_a(), read by gemm_bf16_packed_a(), read-only in between, so
/// threads may share one. It also keeps A itself (the pointer and strides, which must stay
/// valid): where gemm_bf16 would compute a product as C^T = B^T A^T, or on the f32 fallback,
/// gemm_bf16_packed_a() reads A as gemm_bf16 does, so its results are gemm_bf16's, bit for bit.
struct PackedBf16A {
  int64_t M = 0;                   ///< Rows of A.
  int64_t K = 0;                   ///< Columns of A.
  const BFloat16* A = nullptr;     ///< A itself.
  int64_t row_stride = 0;          ///< Distance between A(i, k) and A(i + 1, k).
  int64_t col_stride = 0;          ///< Distance between A(i, k) and A(i, k + 1).
  GemmBf16Path path = GemmBf16Path::f32_fallback;  ///< The path it was packed for.
  int64_t rows = 0;                ///< Packed rows: M rounded up to the path's panel height.
  int64_t padded_max = 0;          ///< Pair words per row of a full slice of K.
  std::vector<uint32_t> words;     ///< The pair words, slice of K by slice (empty on the fallback).
};

/// Packs the (M, K) matrix A (element (i, k) at `A[i * a_row_stride + k * a_col_stride]`) for
/// gemm_bf16_packed_a() on the path gemm_bf16 takes.
PackedBf16A pack_gemm_bf16_a(int64_t M, int64_t K, const BFloat16* A, int64_t a_row_stride,
                             int64_t a_col_stride);

/// `C = alpha * A * B + beta * C` with A packed by pack_gemm_bf16_a(): the same operands, threads
/// and results as gemm_bf16() with A's pointer and strides, without packing A again.
void gemm_bf16_packed_a(const PackedBf16A& A, int64_t N, float alpha, const BFloat16* B, int64_t b_row_stride,
                        int64_t b_col_stride, float beta, float* C, int64_t c_row_stride);

/// `gemm_bf16` on the given path, which must be one this CPU runs (an Error otherwise): tests
/// check every path the machine has, benchmarks time them side by side. Same arguments and rules
/// as `gemm_bf16`.
void gemm_bf16_on(GemmBf16Path path, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
                  int64_t a_row_stride, int64_t a_col_stride, const BFloat16* B, int64_t b_row_stride,
                  int64_t b_col_stride, float beta, float* C, int64_t c_row_stride);

/// Whether this CPU, and its operating system, run `path` (asked once per path; for AMX this
/// asks Linux for the tile registers, `arch_prctl(ARCH_REQ_XCOMP_PERM)`).
bool gemm_bf16_path_available(GemmBf16Path path);

/// The name of a path: "amx_bf16", "avx512_bf16" or "f32 fallback".
const char* gemm_bf16_path_name(GemmBf16Path path);

/// The name of the path `gemm_bf16` takes on this CPU, the fastest available one.
const char* gemm_bf16_path();

}  // namespace lockstep::cpu
