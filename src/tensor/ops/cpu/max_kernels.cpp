// CPU max along one dimension, remembering where the maximum was, and its backward pass
// (declared in max_kernels.h). Rows along the reduced dimension are compared one after the
// other, so the innermost loop always runs over contiguous memory.
#include "tensor/ops/dispatch/max_kernels.h"

#include <algorithm>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"
#include "tensor/ops/rules/max_rule.h"

namespace lockstep::cpu {

namespace {

// The number of elements in dimensions [begin, end) of `shape`: with dimension d reduced,
// outer = span_numel(shape, 0, d) and inner = span_numel(shape, d + 1, shape.size()).
int64_t span_numel(const Shape& shape, size_t begin, size_t end) {
  return shape_numel(Shape(shape.begin() + begin, shape.begin() + end));
}

}  // namespace

void max_kernel(const Tensor& a, int64_t dim, const Tensor& values, const Tensor& indices) {
  const Tensor x = a.contiguous();
  const Shape& shape = x.shape();
  const int64_t outer = span_numel(shape, 0, dim), n = shape[dim], inner = span_numel(shape, dim + 1, shape.size());
  dispatch_numeric_and_16bit(x.dtype(), "max", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;  // f16 and bf16 compare as floats; the winner is stored unchanged
    const T* in = x.data_ptr<T>();
    T* best = values.data_ptr<T>();
    int64_t* where = indices.data_ptr<int64_t>();
#pragma omp parallel for schedule(static) if (outer > 1 && x.numel() >= kParallelGrain)
    for (int64_t o = 0; o < outer; ++o) {
      // slab: (n, inner); b, w: (inner). Row 0 is the first candidate; each later row
      // challenges it element by element.
      const T* slab = in + o * n * inner;
      T* b = best + o * inner;
      int64_t* w = where + o * inner;
      for (int64_t i = 0; i < inner; ++i) {
        b[i] = slab[i];
        w[i] = 0;
      }
      for (int64_t j = 1; j < n; ++j) {
        const T* row = slab + j * inner;
        for (int64_t i = 0; i < inner; ++i) {
          if (max_beats(static_cast<C>(row[i]), static_cast<C>(b[i]))) {
            b[i] = row[i];
            w[i] = j;
          }
        }
      }
    }
  });
}

void max_backward_kernel(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& grad_input) {
  const Tensor g = grad.contiguous(), idx = indices.contiguous();
  const Shape& shape = grad_input.shape();
  const int64_t outer = span_numel(shape, 0, dim), n = shape[dim], inner = span_numel(shape, dim + 1, shape.size());
  dispatch_floating_and_16bit(grad_input.dtype(), "max backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gin = g.data_ptr<T>();
    const int64_t* where = idx.data_ptr<int64_t>();
    T* out = grad_input.data_ptr<T>();
    // out: (outer, n, inner), zero except at the winners.
    std::fill_n(out, grad_input.numel(), T(0));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) out[(o * n + where[o * inner + i]) * inner + i] = gin[o * inner + i];
    }
  });
}

}  // namespace lockstep::cpu
