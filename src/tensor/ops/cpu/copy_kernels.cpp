// The CPU versions of the building blocks in tensor/copy.h; the CUDA ones are in
// tensor/ops/cuda/copy_kernels.cu. Each walks dst in rows (strided_loop.h), so that dense rows get
// a loop the compiler vectorises and any layout works.
#include "tensor/ops/dispatch/copy_kernels.h"

#include <algorithm>
#include <array>
#include <type_traits>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

void copy_kernel(const Tensor& src, const Tensor& dst) {
  const std::array<Shape, 2> strides{dst.strides(), broadcast_strides(src, dst.shape(), "copy_")};
  const std::array<int64_t, 2> offsets{dst.offset(), src.offset()};
  dispatch_all(dst.dtype(), [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    dispatch_all(src.dtype(), [&](auto in_tag) {
      using I = typename decltype(in_tag)::type;
      O* out = static_cast<O*>(dst.storage()->data());
      const I* in = static_cast<const I*>(src.storage()->data());
      for_each_row<2>(dst.shape(), strides, offsets, [&](std::array<int64_t, 2> base, int64_t n, std::array<int64_t, 2> step) {
        // The 16-bit types convert through float; the others convert directly.
        using Via = std::conditional_t<std::is_same_v<I, Half> || std::is_same_v<I, BFloat16>, float, I>;
        O* o = out + base[0];
        const I* x = in + base[1];
        // Dense rows (after coalesce_dims, a dense tensor is one row) get a loop that vectorises;
        // between f16 and f32 the CPU's own conversion instructions do the work.
        if (step[0] == 1 && step[1] == 1) {
          if constexpr (std::is_same_v<I, Half> && std::is_same_v<O, float>) {
            half_to_float(x, o, n);
          } else if constexpr (std::is_same_v<I, float> && std::is_same_v<O, Half>) {
            float_to_half(x, o, n);
          } else {
            for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(static_cast<Via>(x[i]));
          }
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * step[0]] = static_cast<O>(static_cast<Via>(x[i * step[1]]));
        }
      });
    });
  });
}

void fill_kernel(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = static_cast<T>(value);
    T* out = static_cast<T*>(dst.storage()->data());
    for_each_row<1>(dst.shape(), {dst.strides()}, {dst.offset()}, [&](std::array<int64_t, 1> base, int64_t n, std::array<int64_t, 1> step) {
      T* o = out + base[0];
      if (step[0] == 1) {
        std::fill(o, o + n, v);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * step[0]] = v;
      }
    });
  });
}

void axpy_kernel(double alpha, const Tensor& src, const Tensor& dst) {
  const std::array<Shape, 2> strides{dst.strides(), broadcast_strides(src, dst.shape(), "add_")};
  dispatch_floating_and_16bit(dst.dtype(), "add_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;  // a 16-bit T is updated in float and rounded once
    const C a = static_cast<C>(alpha);
    T* out = static_cast<T*>(dst.storage()->data());
    const T* in = static_cast<const T*>(src.storage()->data());
    for_each_row<2>(dst.shape(), strides, {dst.offset(), src.offset()}, [&](std::array<int64_t, 2> base, int64_t n, std::array<int64_t, 2> step) {
      T* o = out + base[0];
      const T* x = in + base[1];
      // The common case (dense rows) gets a loop the compiler can vectorise.
      if (step[0] == 1 && step[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<C>(o[i]) + a * static_cast<C>(x[i]));
      } else {
        for (int64_t i = 0; i < n; ++i) {
          T& d = o[i * step[0]];
          d = static_cast<T>(static_cast<C>(d) + a * static_cast<C>(x[i * step[1]]));
        }
      }
    });
  });
}

void scale_kernel(double value, const Tensor& dst) {
  dispatch_floating_and_16bit(dst.dtype(), "mul_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;
    const C v = static_cast<C>(value);
    T* out = static_cast<T*>(dst.storage()->data());
    for_each_row<1>(dst.shape(), {dst.strides()}, {dst.offset()}, [&](std::array<int64_t, 1> base, int64_t n, std::array<int64_t, 1> step) {
      T* o = out + base[0];
      if (step[0] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<C>(o[i]) * v);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * step[0]] = static_cast<T>(static_cast<C>(o[i * step[0]]) * v);
      }
    });
  });
}

}  // namespace lockstep::cpu
