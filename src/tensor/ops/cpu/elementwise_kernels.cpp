// CPU elementwise kernels: one strided loop (tensor/strided_loop.h) per op, with the scalar
// function (tensor/ops/rules/elementwise_math.h, shared with the CUDA kernels) chosen at compile time so
// the inner loop vectorises. 16-bit operands compute in float and round once per element.
#include "tensor/ops/dispatch/elementwise_kernels.h"

#include "core/dispatch.h"
#include "core/error.h"
#include "tensor/strided_loop.h"
#include "tensor/ops/rules/elementwise_math.h"

namespace lockstep::cpu {

namespace {

// Runs f(x, y) over the broadcast operands; dense rows get a unit-stride loop. A 16-bit T is
// widened to float (its opmath type) for f, and the result rounded once on the store.
template <class T, class Out, class F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F op) {
  using C = opmath_t<T>;
  const auto f = [op](T x, T y) { return static_cast<Out>(op(static_cast<C>(x), static_cast<C>(y))); };
  const std::array<Shape, 3> strides{out.strides(), broadcast_strides(a, out.shape(), "binary op"),
                                     broadcast_strides(b, out.shape(), "binary op")};
  Out* o = static_cast<Out*>(out.storage()->data());
  const T* x = static_cast<const T*>(a.storage()->data());
  const T* y = static_cast<const T*>(b.storage()->data());
  for_each_row<3>(out.shape(), strides, {out.offset(), a.offset(), b.offset()},
                  [&](std::array<int64_t, 3> base, int64_t n, std::array<int64_t, 3> step) {
                    Out* po = o + base[0];
                    const T* px = x + base[1];
                    const T* py = y + base[2];
                    if (step[1] == 1 && step[2] == 1) {
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i], py[i]);
                    } else if (step[1] == 1 && step[2] == 0) {  // tensor op scalar / broadcast row
                      const T yv = *py;
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i], yv);
                    } else {
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i * step[1]], py[i * step[2]]);
                    }
                  });
}

template <class T, class F>
void unary_loop(const Tensor& a, const Tensor& out, F op) {
  using C = opmath_t<T>;
  const auto f = [op](T x) { return static_cast<T>(op(static_cast<C>(x))); };
  const std::array<Shape, 2> strides{out.strides(), a.strides()};
  T* o = static_cast<T*>(out.storage()->data());
  const T* x = static_cast<const T*>(a.storage()->data());
  for_each_row<2>(out.shape(), strides, {out.offset(), a.offset()},
                  [&](std::array<int64_t, 2> base, int64_t n, std::array<int64_t, 2> step) {
                    T* po = o + base[0];
                    const T* px = x + base[1];
                    if (step[1] == 1) {
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i * step[1]]);
                    }
                  });
}

}  // namespace

void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  // Comparisons work on every numeric type (e.g. predicted vs true i64 labels)...
  if (out.dtype() == DType::boolean) {
    return dispatch_numeric_and_16bit(a.dtype(), name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      dispatch_comparison(op, [&](auto f) { binary_loop<T, bool>(a, b, out, f); });
    });
  }
  // ...arithmetic only on floating types.
  dispatch_floating_and_16bit(a.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_arithmetic(op, [&](auto f) { binary_loop<T, T>(a, b, out, f); });
  });
}

void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out) {
  dispatch_floating_and_16bit(a.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_unary(op, [&](auto f) { unary_loop<T>(a, out, f); });
  });
}

}  // namespace lockstep::cpu
