// The batched GEMM on the CPU: one cpu::gemm (or cpu::gemm_16bit) per matrix of the batch. gemm
// itself spreads a large product over the CPU's threads, so the matrices go one at a time.
#include "tensor/ops/dispatch/matmul_kernels.h"

#include <type_traits>

#include "core/dispatch.h"
#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "tensor/ops/rules/matrix_batch.h"

namespace lockstep::cpu {

void batched_gemm_kernel(const char* op, const Tensor& a, const Shape& a_strides, const Tensor& b,
                         const Shape& b_strides, int64_t K, const Tensor& out, double beta) {
  const int64_t dims = out.dim();
  const int64_t M = out.size(-2), N = out.size(-1);
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t a_row = a_strides[dims - 2], a_col = a_strides[dims - 1];
  const int64_t b_row = b_strides[dims - 2], b_col = b_strides[dims - 1];
  dispatch_floating_and_16bit(out.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;
    constexpr bool wide = std::is_same_v<T, Acc>;
    // acc: out itself, or for 16-bit types an f32 copy (only read when beta is not 0).
    const Tensor acc = wide ? out : empty(out.shape(), out.options().dtype(DType::f32));
    if (!wide && beta != 0.0) copy_kernel(out, acc);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    Acc* pc = acc.data_ptr<Acc>();
    const int64_t matrices = shape_numel(batch);
    for (int64_t i = 0; i < matrices; ++i) {
      const auto [oa, ob] = matrix_offsets(i, batch, a_strides, b_strides);
      if constexpr (wide) {
        gemm<T>(M, N, K, T(1), pa + oa, a_row, a_col, pb + ob, b_row, b_col, static_cast<T>(beta), pc + i * M * N, N);
      } else {
        gemm_16bit<T>(M, N, K, 1.0f, pa + oa, a_row, a_col, pb + ob, b_row, b_col, static_cast<float>(beta),
                      pc + i * M * N, N);
      }
    }
    if (!wide) copy_kernel(acc, out);
  });
}

}  // namespace lockstep::cpu
