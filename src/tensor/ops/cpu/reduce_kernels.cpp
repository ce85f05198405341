// CPU sum over a set of dimensions. The input is viewed as (kept..., reduced...) and each output
// element sums its own slice, so outputs can be computed in parallel without atomics; when
// there are fewer outputs than threads (a full sum), the threads split the slice instead.
#include "tensor/ops/dispatch/reduce_kernels.h"

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"
#include "core/threads.h"

namespace lockstep::cpu {

namespace {

// Adds n values spaced `stride` apart, in Acc, for `Ways` such runs at once, the w-th starting
// at x + w * way_step. Eight running sums per run rather than one: a single chain of additions
// waits for each addition to finish (4 cycles for a double) before the next starts, while eight
// independent chains keep the adder busy and let the compiler use vector instructions. Each
// run's sums are added up in a fixed order, so its result is reproducible, and it is the same
// whatever Ways is: the runs only share the loop, whose Ways * 8 chains keep the adder busier
// still (the bias gradient of a convolution sums one run per image, of a linear layer one
// strided run per output).
template <class Acc, int Ways, class T>
void sum_strided(const T* x, int64_t way_step, int64_t n, int64_t stride, Acc* sums) {
  constexpr int kLanes = 8;
  // Each run's lanes lie side by side where the run is contiguous (vectors along the run), each
  // lane's runs where the runs are (vectors across the runs).
  Acc along[Ways][kLanes] = {}, across[kLanes][Ways] = {};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + kLanes <= n; i += kLanes)
      for (int w = 0; w < Ways; ++w)
        for (int l = 0; l < kLanes; ++l) along[w][l] += static_cast<Acc>(x[w * way_step + i + l]);
  } else {
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l)
        for (int w = 0; w < Ways; ++w) across[l][w] += static_cast<Acc>(x[w * way_step + (i + l) * stride]);
  }
  for (int w = 0; w < Ways; ++w) {
    Acc total = 0;
    for (int64_t j = i; j < n; ++j) total += static_cast<Acc>(x[w * way_step + j * stride]);
    for (int l = 0; l < kLanes; ++l) total += stride == 1 ? along[w][l] : across[l][w];
    sums[w] = total;
  }
}

// How many runs sum_strided takes at once where it can.
constexpr int kWays = 8;

// The sums of pieces [first, first + count) of a slice, into sums: kWays at a time where they
// have one length and are evenly spaced (the rows of a convolution's bias gradient), else one
// by one.
template <class Acc, class T>
void sum_pieces(const T* in, const RowPieces<1>& pieces, int64_t first, int64_t count, Acc* sums) {
  std::array<int64_t, 1> b0, b1;
  int64_t w = 0;
  while (w < count) {
    const int64_t n = pieces.piece(first + w, b0);
    bool even = w + kWays <= count;
    int64_t way_step = 0;
    for (int k = 1; even && k < kWays; ++k) {
      even = pieces.piece(first + w + k, b1) == n;
      if (k == 1) way_step = b1[0] - b0[0];
      even = even && b1[0] - b0[0] == k * way_step;
    }
    if (even) {
      sum_strided<Acc, kWays>(in + b0[0], way_step, n, pieces.step()[0], sums + w);
      w += kWays;
    } else {
      sum_strided<Acc, 1>(in + b0[0], 0, n, pieces.step()[0], sums + w);
      ++w;
    }
  }
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
      // The slice's pieces (rows, long rows cut into pieces), fixed by the shape.
      const std::array<int64_t, 1> start{base};
      const RowPieces<1> pieces(red_shape, red_walk, start);
      // The pieces' sums are added in order, so the result does not depend on the number of
      // threads. A small slice: this thread sums its pieces, kWays at a time, with no buffer to
      // allocate. A plain loop, not an OpenMP region that its `if` keeps serial:
      // entering even such a region costs about half a microsecond, once per output, which for
      // a bias gradient of 128 outputs over 64 values each was most of the time.
      if (slice < kParallelGrain) {
        Acc total = 0, sums[kWays];
        for (int64_t first = 0; first < pieces.count(); first += kWays) {
          const int64_t count = std::min<int64_t>(kWays, pieces.count() - first);
          sum_pieces(in, pieces, first, count, sums);
          for (int64_t w = 0; w < count; ++w) total += sums[w];
        }
        return total;
      }
      // A large slice: the threads share out its pieces, in groups of kWays.
      std::vector<Acc> piece_sums(static_cast<size_t>(pieces.count()));
      const int64_t groups = (pieces.count() + kWays - 1) / kWays;
#pragma omp parallel for schedule(static)
      for (int64_t group = 0; group < groups; ++group) {
        const int64_t first = group * kWays;
        sum_pieces(in, pieces, first, std::min<int64_t>(kWays, pieces.count() - first), piece_sums.data() + first);
      }
      Acc total = 0;
      for (const Acc piece_sum : piece_sums) total += piece_sum;
      return total;
    };

    auto output_base = [&](int64_t k) {
      int64_t base = a.offset();
      for (size_t d = 0; d < kept_shape.size(); ++d) base += (k / kept_index_strides[d]) % kept_shape[d] * kept_strides[d];
      return base;
    };

    // Outputs [k0, k0 + kWays) whose slices are single runs, evenly spaced (a linear layer's
    // bias gradient, dy (N, C) summed over N: output c's run starts at c), are summed together;
    // others one by one.
    const bool single_runs = red_shape.size() <= 1 && slice <= kRowPiece;
    const int64_t run_stride = red_shape.empty() ? 1 : red_walk[0][0];
    const int64_t per_block = single_runs ? kWays : 1;
    auto sum_block = [&](int64_t k0) {
      const int64_t count = std::min<int64_t>(per_block, outputs - k0);
      const int64_t base = output_base(k0), way_step = count > 1 ? output_base(k0 + 1) - base : 0;
      bool even = single_runs && count == kWays;
      for (int64_t j = 2; even && j < count; ++j) even = output_base(k0 + j) - base == j * way_step;
      if (even) {
        Acc sums[kWays];
        sum_strided<Acc, kWays>(in + base, way_step, slice, run_stride, sums);
        for (int64_t j = 0; j < count; ++j) o[k0 + j] = static_cast<Out>(sums[j]);
      } else {
        for (int64_t k = k0; k < k0 + count; ++k) o[k] = static_cast<Out>(sum_slice(output_base(k)));
      }
    };

    // Many outputs: one thread per block of outputs. Few outputs with large slices: serial over
    // outputs, and sum_slice spreads each slice over the threads.
    const bool parallel_outputs = outputs >= 2 * get_num_threads() || slice < kParallelGrain;
    const int64_t blocks = (outputs + per_block - 1) / per_block;
#pragma omp parallel for schedule(static) if (parallel_outputs && outputs * slice >= kParallelGrain && blocks > 1)
    for (int64_t block = 0; block < blocks; ++block) sum_block(block * per_block);
  });
}

}  // namespace lockstep::cpu
