/// \file
/// What the CPU's blocked GEMMs (gemm.cpp for f32 and f64, gemm_bf16.cpp for bf16 operands)
/// share around their micro-kernels: block arithmetic, per-thread scratch buffers, the thread
/// count, and the update of a partial edge tile of C. Internal to those two files.
#pragma once

#include <cstdint>
#include <vector>

#include "core/threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace lockstep::cpu::gemm_detail {

/// a / b rounded up, for positive b.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
/// a rounded up to a multiple of b.
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/// Scratch memory for packed panels, kept per thread from one call to the next: a
/// convolution runs one GEMM per image, thousands per training step, and allocating and
/// zero-filling fresh buffers each time cost more than the smallest of those products.
template <class T>
T* scratch(std::vector<T>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
  return buffer.data();
}

/// The number of threads a GEMM may use: all of OpenMP's, unless it is already running
/// inside a parallel region (a convolution's shares or groups of images, a DataParallel
/// replica), where it runs alone.
inline int gemm_threads() {
#ifdef _OPENMP
  if (omp_in_parallel()) return 1;
#endif
  return get_num_threads();
}

/// C(i, j) = alpha * ab(i, j) + beta * C(i, j) for an m x n tile of C whose element (i, j) is
/// C[i * c_rs + j * c_cs]; `ab` has row stride ldab. beta == 0 does not read C: 0 * NaN is NaN,
/// and C may be uninitialised.
template <class T>
void update_tile(int64_t m, int64_t n, const T* ab, int64_t ldab, T alpha, T beta, T* C, int64_t c_rs,
                 int64_t c_cs) {
  for (int64_t i = 0; i < m; ++i) {
    T* c = C + i * c_rs;
    const T* r = ab + i * ldab;
    if (beta == T(0)) {
      for (int64_t j = 0; j < n; ++j) c[j * c_cs] = alpha * r[j];
    } else {
      for (int64_t j = 0; j < n; ++j) c[j * c_cs] = alpha * r[j] + beta * c[j * c_cs];
    }
  }
}

}  // namespace lockstep::cpu::gemm_detail
