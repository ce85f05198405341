// The batched GEMM on the CPU: one cpu::gemm (or cpu::gemm_16bit) per matrix of the batch. gemm
// itself spreads a large product over the CPU's threads, so the matrices go one at a time.
#include "tensor/ops/dispatch/matmul_kernels.h"

#include <type_traits>

#include "core/dispatch.h"
#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_16bit.h"

namespace lockstep::cpu {

void batched_gemm_kernel(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemm& g,
                         double beta) {
  dispatch_floating_and_16bit(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;  // c's element type: f32 for 16-bit operands
    for (int64_t i = 0; i < g.matrices(); ++i) {
      const auto [oa, ob] = g.offsets(i);
      const T* ai = a.data_ptr<T>() + oa;
      const T* bi = b.data_ptr<T>() + ob;
      Acc* ci = c.data_ptr<Acc>() + i * g.M * g.N;
      if constexpr (std::is_same_v<T, Acc>) {
        gemm<T>(g.M, g.N, g.K, T(1), ai, g.a_row_stride, g.a_col_stride, bi, g.b_row_stride, g.b_col_stride,
                static_cast<T>(beta), ci, g.N);
      } else {
        gemm_16bit<T>(g.M, g.N, g.K, 1.0f, ai, g.a_row_stride, g.a_col_stride, bi, g.b_row_stride, g.b_col_stride,
                      static_cast<float>(beta), ci, g.N);
      }
    }
  });
}

}  // namespace lockstep::cpu
