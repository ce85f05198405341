// CUDA sum over a set of dimensions; its CPU reference is cpu::sum_kernel
// (tensor/ops/cpu/reduce_kernels.cpp), whose accuracy it matches: floats accumulate in double
// (f16 and bf16 too, rounded to their dtype once at the end), integers and bools exactly in
// int64.
//   a: any shape and layout; reduce[d]: whether dimension d is summed
//   out: (kept dimensions...), contiguous
// The input is seen as x: (rows, row_len) = (kept dimensions..., reduced dimensions...),
// row-major, so that out[k] is the sum of row k. x is a permuted view of a, copied into a
// dense block only when that view is not dense already (summing the last dimensions of a
// contiguous tensor copies nothing). Rows are shared among warps or blocks and long rows
// split into chunks as row_reduce.cuh describes.
#include <cstdint>
#include <type_traits>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/dispatch/reduce_kernels.h"
#include "tensor/ops/cuda/row_reduce.cuh"

namespace lockstep::cuda {

namespace {

struct Plus {
  template <class V>
  __device__ V operator()(V x, V y) const { return x + y; }
};

// x: (rows, row_len) dense; out[item]: the sum of item (row, chunk) of `split`.
template <int kGroup, class T, class Acc, class Out>
__global__ void sum_rows(const T* x, RowSplit split, Out* out) {
  const GroupItems<kGroup> group;
  for (int64_t item = group.first(); item < split.items(); item += group.stride()) {
    const int64_t row = item / split.chunks;
    const int64_t begin = (item % split.chunks) * split.chunk_len;
    const int64_t end = begin + split.chunk_len < split.row_len ? begin + split.chunk_len : split.row_len;
    const T* line = x + row * split.row_len;
    // Each thread adds every kGroup-th element of the chunk, neighbouring threads reading
    // neighbouring elements; then the group adds up its threads' totals.
    Acc total = 0;
    for (int64_t i = begin + group.lane(); i < end; i += kGroup) total += convert<Acc>(line[i]);
    total = group_reduce<kGroup>(total, Acc(0), Plus{});
    if (group.lane() == 0) out[item] = convert<Out>(total);
  }
}

// out[r] = sum of row r of the dense (rows, row_len) block x. Rows cut into several chunks
// first give one partial sum per chunk, (rows, chunks) in Acc, which are then summed the same way.
template <class T, class Acc, class Out>
void sum_rows_on(Device device, const T* x, int64_t rows, int64_t row_len, Out* out) {
  const RowSplit split = split_rows(rows, row_len);
  // The partial sums live until the second pass, queued on the same stream, has read them.
  Tensor partial;
  Acc* first_pass_out = nullptr;
  if (split.chunks > 1) {
    partial = empty({split.items()}, TensorOptions().dtype(dtype_of<Acc>::value).device(device));
    first_pass_out = partial.data_ptr<Acc>();
  }
  launch_groups(split, [&](auto group, unsigned int blocks) {
    constexpr int kGroup = decltype(group)::value;
    if (split.chunks > 1) {
      sum_rows<kGroup, T, Acc, Acc><<<blocks, kBlockSize, 0, stream_for(device)>>>(x, split, first_pass_out);
    } else {
      sum_rows<kGroup, T, Acc, Out><<<blocks, kBlockSize, 0, stream_for(device)>>>(x, split, out);
    }
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
  if (split.chunks > 1) sum_rows_on<Acc, Acc, Out>(device, first_pass_out, rows, split.chunks, out);
}

}  // namespace

void sum_kernel(const Tensor& a, const std::vector<bool>& reduce, const Tensor& out) {
  // The kept dimensions first, then the reduced ones.
  Shape order;
  int64_t rows = 1, row_len = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (!reduce[d]) order.push_back(d), rows *= a.shape()[d];
  }
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (reduce[d]) order.push_back(d), row_len *= a.shape()[d];
  }
  dispatch_numeric_and_16bit(a.dtype(), "sum", [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using T = device_type_t<Host>;  // __half for f16, __nv_bfloat16 for bf16
    constexpr bool floating = std::is_floating_point_v<opmath_t<Host>>;
    using Acc = std::conditional_t<floating, double, int64_t>;
    using OutHost = std::conditional_t<floating, Host, int64_t>;
    if (rows == 0) return;
    const Tensor x = a.detach().permute(order).contiguous();
    sum_rows_on<T, Acc>(out.device(), device_ptr(x.data_ptr<Host>()), rows, row_len,
                        device_ptr(out.data_ptr<OutHost>()));
  });
}

}  // namespace lockstep::cuda
