#include "tensor/copy.h"

#include <algorithm>

#include "tensor/cuda/copy_kernels.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "tensor/strided_loop.h"

namespace lockstep {

Shape broadcast_strides(const Tensor& t, const Shape& target, const char* op) {
  const int64_t dims = static_cast<int64_t>(target.size());
  const int64_t lead = dims - t.dim();
  LOCKSTEP_CHECK(lead >= 0, op, ": cannot broadcast shape ", shape_str(t.shape()), " to ", shape_str(target));
  Shape strides(target.size(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t size = t.shape()[d];
    LOCKSTEP_CHECK(size == target[lead + d] || size == 1, op, ": cannot broadcast shape ", shape_str(t.shape()),
                   " to ", shape_str(target));
    strides[lead + d] = size == 1 ? 0 : t.strides()[d];
  }
  return strides;
}

namespace {
// A destination with a stride-0 (expanded) dimension would write several results into one
// memory location, and under OpenMP race on it.
void check_writable(const Tensor& dst, const char* op) {
  for (int64_t d = 0; d < dst.dim(); ++d) {
    LOCKSTEP_CHECK(dst.strides()[d] != 0 || dst.shape()[d] <= 1, op, ": the tensor written to is expanded (stride 0 ",
                   "in dimension ", d, "), so several of its elements share one memory location; write to a "
                   "contiguous() copy instead");
  }
}
void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  LOCKSTEP_CHECK(a.device() == b.device(), op, ": expected all tensors on the same device, got ", a.device(), " and ",
                 b.device());
}
}  // namespace

void copy_strided(const Tensor& src, const Tensor& dst) {
  // Across devices the data first travels to dst's device, then lands in dst's layout there.
  if (src.device() != dst.device()) return copy_strided(src.detach().to(dst.device()), dst);
  check_writable(dst, "copy_");
  if (dst.device().is_cuda()) return cuda::copy_kernel(src, dst);
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
        // Dense rows (after coalesce_dims, a dense tensor is one row) get a loop that vectorises.
        if (step[0] == 1 && step[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(static_cast<Via>(x[i]));
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * step[0]] = static_cast<O>(static_cast<Via>(x[i * step[1]]));
        }
      });
    });
  });
}

void fill_strided(const Tensor& dst, double value) {
  check_writable(dst, "fill_");
  if (dst.device().is_cuda()) return cuda::fill_kernel(dst, value);
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

void axpy_strided(double alpha, const Tensor& src, const Tensor& dst) {
  check_same_device(src, dst, "add_");
  check_writable(dst, "add_");
  LOCKSTEP_CHECK(src.dtype() == dst.dtype(), "add_: expected both tensors to have the same dtype, got ",
                 dtype_name(dst.dtype()), " and ", dtype_name(src.dtype()));
  if (dst.device().is_cuda()) return cuda::axpy_kernel(alpha, src, dst);
  const std::array<Shape, 2> strides{dst.strides(), broadcast_strides(src, dst.shape(), "add_")};
  dispatch_floating(dst.dtype(), "add_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T a = static_cast<T>(alpha);
    T* out = static_cast<T*>(dst.storage()->data());
    const T* in = static_cast<const T*>(src.storage()->data());
    for_each_row<2>(dst.shape(), strides, {dst.offset(), src.offset()}, [&](std::array<int64_t, 2> base, int64_t n, std::array<int64_t, 2> step) {
      T* o = out + base[0];
      const T* x = in + base[1];
      // The common case (dense rows) gets a loop the compiler can vectorise.
      if (step[0] == 1 && step[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] += a * x[i];
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * step[0]] += a * x[i * step[1]];
      }
    });
  });
}

void scale_strided(double value, const Tensor& dst) {
  check_writable(dst, "mul_");
  if (dst.device().is_cuda()) return cuda::scale_kernel(value, dst);
  dispatch_floating(dst.dtype(), "mul_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = static_cast<T>(value);
    T* out = static_cast<T*>(dst.storage()->data());
    for_each_row<1>(dst.shape(), {dst.strides()}, {dst.offset()}, [&](std::array<int64_t, 1> base, int64_t n, std::array<int64_t, 1> step) {
      T* o = out + base[0];
      if (step[0] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] *= v;
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * step[0]] *= v;
      }
    });
  });
}

}  // namespace lockstep
