/// \file
/// One GEMM call for every floating dtype, summing in its opmath type: the convolution kernels'
/// products, written once for f32, f64 and the 16-bit dtypes. Internal to the CPU kernels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_16bit.h"

namespace lockstep::cpu {

/// `C = A B + beta C` with sums in `Acc`: `cpu::gemm` when T is Acc (f32, f64), `cpu::gemm_16bit`
/// for 16-bit operands, whose products are summed into an f32 C. A is (M, K), B (K, N), with the
/// strides of `cpu::gemm`; C's rows are `ldc` apart.
template <class T, class Acc>
void gemm_into(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B, int64_t b_rs,
               int64_t b_cs, Acc beta, Acc* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, Acc>) {
    gemm<T>(M, N, K, T(1), A, a_rs, a_cs, B, b_rs, b_cs, beta, C, ldc);
  } else {
    gemm_16bit<T>(M, N, K, 1.0f, A, a_rs, a_cs, B, b_rs, b_cs, beta, C, ldc);
  }
}

}  // namespace lockstep::cpu
