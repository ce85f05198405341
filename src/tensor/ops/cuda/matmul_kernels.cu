// The batched GEMM on a GPU. CPU reference: tensor/ops/cpu/matmul_kernels.cpp, which runs one
// cpu::gemm per matrix. Here the matrices of the last batch dimension go to cuBLAS in one
// cuda::gemm_batched call (a batch stride of 0 repeats a broadcast matrix), so small matrices
// do not cost a launch each; a lone matrix (no batch dimensions) is one cuda::gemm.
#include "tensor/ops/dispatch/matmul_kernels.h"

#include "core/dispatch.h"
#include "tensor/ops/cuda/gemm.h"

namespace lockstep::cuda {

void batched_gemm_kernel(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemm& g,
                         double beta) {
  // The batch as (groups, last): one gemm_batched call per group, over the last batch dimension.
  const int64_t last = g.batch.empty() ? 1 : g.batch.back();
  const int64_t groups = last == 0 ? 0 : g.matrices() / last;
  const int64_t a_step = g.batch.empty() ? 0 : g.a_batch_strides.back();
  const int64_t b_step = g.batch.empty() ? 0 : g.b_batch_strides.back();
  dispatch_floating_and_16bit(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;  // c's element type: f32 for 16-bit operands (cuBLAS's GemmEx)
    const Acc one(1), scale_c = static_cast<Acc>(beta);
    if (g.batch.empty()) {
      gemm(g.M, g.N, g.K, one, a.data_ptr<T>(), g.a_row_stride, g.a_col_stride, b.data_ptr<T>(), g.b_row_stride,
           g.b_col_stride, scale_c, c.data_ptr<Acc>(), g.N);
      return;
    }
    for (int64_t group = 0; group < groups; ++group) {
      // Matrix (group, 0) of the batch starts the call; the others follow at a_step, b_step.
      const auto [oa, ob] = g.offsets(group * last);
      gemm_batched(last, g.M, g.N, g.K, one, a.data_ptr<T>() + oa, a_step, g.a_row_stride, g.a_col_stride,
                   b.data_ptr<T>() + ob, b_step, g.b_row_stride, g.b_col_stride, scale_c,
                   c.data_ptr<Acc>() + group * last * g.M * g.N, g.M * g.N, g.N);
    }
  });
}

}  // namespace lockstep::cuda
