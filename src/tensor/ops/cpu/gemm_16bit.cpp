// The 16-bit GEMM's two paths: bf16 on the vdpbf16ps kernel (gemm_bf16.cpp) where the CPU has
// it, and everything else widened to f32 for cpu::gemm<float>.
#include "tensor/ops/cpu/gemm_16bit.h"

#include <type_traits>
#include <vector>

#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_bf16.h"

namespace lockstep::cpu {
namespace {

// Widens the rows x cols operand X (element (i, k) at X[i * rs + k * cs]) into the row-major out;
// dense f16 rows with F16C's conversions (core/half.h).
template <class T>
void widen(int64_t rows, int64_t cols, const T* X, int64_t rs, int64_t cs, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      if (cs == 1) {
        half_to_float(X + i * rs, out + i * cols, cols);
        continue;
      }
    }
    for (int64_t k = 0; k < cols; ++k) out[i * cols + k] = float(X[i * rs + k * cs]);
  }
}

}  // namespace

template <class T>
void gemm_16bit_via_f32(int64_t M, int64_t N, int64_t K, float alpha, const T* A, int64_t a_row_stride,
                        int64_t a_col_stride, const T* B, int64_t b_row_stride, int64_t b_col_stride,
                        float beta, float* C, int64_t c_row_stride) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    gemm<float>(M, N, 0, alpha, nullptr, 0, 0, nullptr, 0, 0, beta, C, c_row_stride);
    return;
  }
  std::vector<float> a(M * K), b(K * N);
  widen(M, K, A, a_row_stride, a_col_stride, a.data());
  widen(K, N, B, b_row_stride, b_col_stride, b.data());
  gemm<float>(M, N, K, alpha, a.data(), K, 1, b.data(), N, 1, beta, C, c_row_stride);
}

template <class T>
void gemm_16bit(int64_t M, int64_t N, int64_t K, float alpha, const T* A, int64_t a_row_stride,
                int64_t a_col_stride, const T* B, int64_t b_row_stride, int64_t b_col_stride, float beta,
                float* C, int64_t c_row_stride) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    gemm_bf16(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
              c_row_stride);
  } else {
    gemm_16bit_via_f32(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta,
                       C, c_row_stride);
  }
}

#define LOCKSTEP_INSTANTIATE(T)                                                                            \
  template void gemm_16bit<T>(int64_t, int64_t, int64_t, float, const T*, int64_t, int64_t, const T*,    \
                              int64_t, int64_t, float, float*, int64_t);                                  \
  template void gemm_16bit_via_f32<T>(int64_t, int64_t, int64_t, float, const T*, int64_t, int64_t,      \
                                      const T*, int64_t, int64_t, float, float*, int64_t);
LOCKSTEP_INSTANTIATE(Half)
LOCKSTEP_INSTANTIATE(BFloat16)
#undef LOCKSTEP_INSTANTIATE

}  // namespace lockstep::cpu
