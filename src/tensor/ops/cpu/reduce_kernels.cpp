// CPU sum over a set of dimensions. The input is viewed as (kept..., reduced...) and each output
// element sums its own slice, so outputs can be computed in parallel without atomics; when
// there are fewer outputs than threads (a full sum), the threads split the slice instead.
#include "tensor/ops/cpu/reduce_kernels.h"

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"
#include "core/threads.h"

namespace lockstep::cpu {

namespace {

// Adds n values spaced `stride` apart, in Acc. Eight running sums rather than one: a single
// chain of additions waits for each addition to finish (4 cycles for a double) before the
// next starts, while eight independent chains keep the adder busy and let the compiler use
// vector instructions. They are added up in a fixed order, so the result is reproducible.
template <class Acc, class T>
Acc sum_strided(const T* x, int64_t n, int64_t stride) {
  constexpr int kLanes = 8;
  Acc lanes[kLanes] = {};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<Acc>(x[i + l]);
  } else {
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<Acc>(x[(i + l) * stride]);
  }
  Acc total = 0;
  for (; i < n; ++i) total += static_cast<Acc>(x[i * stride]);
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

}  // namespace

void sum_kernel(const Tensor& a, const std::vector<bool>& reduce, const Tensor& out) {
  // Split a's dimensions into kept (outer) and reduced (inner).
  Shape kept_shape, kept_strides, red_shape, red_strides;
  for (int64_t d = 0; d < a.dim(); ++d) {
    (reduce[d] ? red_shape : kept_shape).push_back(a.shape()[d]);
    (reduce[d] ? red_strides : kept_strides).push_back(a.strides()[d]);
  }
  const int64_t outputs = shape_numel(kept_shape);
  const int64_t slice = shape_numel(red_shape);
  // E.g. a bias gradient, dy (N, C, H, W) summed over {0, 2, 3}: its slices walk (N, H * W).
  // Merged once here, walked once per output below.
  std::array<Shape, 1> red_walk{red_strides};
  coalesce_dims(red_shape, red_walk);
  const Shape kept_index_strides = contiguous_strides(kept_shape);

  dispatch_numeric_and_16bit(a.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Floats accumulate in double (accurate), the 16-bit ones too, which are rounded to T once
    // at the end; integers and bools in int64, exactly, and their sum is an i64 tensor, as in
    // PyTorch.
    constexpr bool floating = std::is_floating_point_v<opmath_t<T>>;
    using Acc = std::conditional_t<floating, double, int64_t>;
    using Out = std::conditional_t<floating, T, int64_t>;
    const T* in = static_cast<const T*>(a.storage()->data());
    Out* o = out.data_ptr<Out>();

    // Sum one output's slice, starting at element offset `base` of the input.
    auto sum_slice = [&](int64_t base) {
      Acc total = 0;
      // The slice's pieces (rows, long rows cut into pieces), fixed by the shape.
      const std::array<int64_t, 1> start{base};
      const RowPieces<1> pieces(red_shape, red_walk, start);
      // A small slice: this thread walks its pieces in order. A plain loop, not an OpenMP
      // region that its `if` keeps serial: entering even such a region costs about half a
      // microsecond, once per output, which for a bias gradient of 128 outputs over 64 values
      // each was most of the time.
      if (slice < kParallelGrain) {
        for (int64_t w = 0; w < pieces.count(); ++w) {
          std::array<int64_t, 1> b;
          const int64_t n = pieces.piece(w, b);
          total += sum_strided<Acc>(in + b[0], n, pieces.step()[0]);
        }
        return total;
      }
      // A large slice: the threads share out its pieces, and their sums are added in order
      // afterwards, so the result does not depend on the number of threads.
      std::vector<Acc> piece_sums(static_cast<size_t>(pieces.count()));
#pragma omp parallel for schedule(static)
      for (int64_t w = 0; w < pieces.count(); ++w) {
        std::array<int64_t, 1> b;
        const int64_t n = pieces.piece(w, b);
        piece_sums[w] = sum_strided<Acc>(in + b[0], n, pieces.step()[0]);
      }
      for (const Acc piece_sum : piece_sums) total += piece_sum;
      return total;
    };

    auto output_base = [&](int64_t k) {
      int64_t base = a.offset();
      for (size_t d = 0; d < kept_shape.size(); ++d) base += (k / kept_index_strides[d]) % kept_shape[d] * kept_strides[d];
      return base;
    };

    // Many outputs: one thread per output slice. Few outputs with large slices: serial over
    // outputs, and sum_slice spreads each slice over the threads.
    const bool parallel_outputs = outputs >= 2 * get_num_threads() || slice < kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel_outputs && outputs * slice >= kParallelGrain && outputs > 1)
    for (int64_t k = 0; k < outputs; ++k) o[k] = static_cast<Out>(sum_slice(output_base(k)));
  });
}

}  // namespace lockstep::cpu
