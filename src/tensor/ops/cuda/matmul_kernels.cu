// The batched GEMM on a GPU. CPU reference: tensor/ops/cpu/matmul_kernels.cpp, which runs one
// cpu::gemm per matrix. Here the matrices of the last batch dimension go to cuBLAS in one
// cuda::gemm_batched call (a batch stride of 0 repeats a broadcast matrix), so small matrices
// do not cost a launch each; a lone matrix (no batch dimensions) is one cuda::gemm.
#include "tensor/ops/dispatch/matmul_kernels.h"

#include <algorithm>
#include <type_traits>

#include "core/dispatch.h"
#include "tensor/ops/cuda/gemm.h"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "tensor/ops/rules/matrix_batch.h"

namespace lockstep::cuda {

void batched_gemm_kernel(const char* op, const Tensor& a, const Shape& a_strides, const Tensor& b,
                         const Shape& b_strides, int64_t K, const Tensor& out, double beta) {
  const int64_t dims = out.dim();
  const int64_t M = out.size(-2), N = out.size(-1);
  const int64_t a_row = a_strides[dims - 2], a_col = a_strides[dims - 1];
  const int64_t b_row = b_strides[dims - 2], b_col = b_strides[dims - 1];
  // batch = outer x last: one gemm_batched call per index of the outer batch dimensions.
  const Shape outer(out.shape().begin(), out.shape().end() - std::min<int64_t>(dims, 3));
  const int64_t last = dims > 2 ? out.size(-3) : 1;
  const int64_t a_step = dims > 2 ? a_strides[dims - 3] : 0, b_step = dims > 2 ? b_strides[dims - 3] : 0;
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
    const Acc alpha(1), scale_c = static_cast<Acc>(beta);
    if (dims == 2) {
      gemm(M, N, K, alpha, pa, a_row, a_col, pb, b_row, b_col, scale_c, pc, N);
    } else {
      const int64_t groups = shape_numel(outer);
      for (int64_t g = 0; g < groups; ++g) {
        const auto [oa, ob] = matrix_offsets(g, outer, a_strides, b_strides);
        gemm_batched(last, M, N, K, alpha, pa + oa, a_step, a_row, a_col, pb + ob, b_step, b_row, b_col, scale_c,
                     pc + g * last * M * N, M * N, N);
      }
    }
    if (!wide) copy_kernel(acc, out);
  });
}

}  // namespace lockstep::cuda
