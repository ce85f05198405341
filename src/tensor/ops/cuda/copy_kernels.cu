// The CUDA versions of the building blocks in tensor/copy.cpp (their CPU reference):
//   copy_kernel   dst[i] = convert(src[i])    any layouts, src broadcast to dst, any dtypes
//   fill_kernel   dst[i] = value
//   axpy_kernel   dst[i] += alpha * src[i]    floating (f16 and bf16 too), src broadcast to dst
//   scale_kernel  dst[i] *= value             floating (f16 and bf16 too)
// One thread per element of dst in a grid-stride loop; StridedOffsets turns the thread's
// row-major position into each operand's memory offset, so views need no copies. axpy and
// scale compute in C = device_opmath_t<T>: a 16-bit element is widened to float, updated with a
// float alpha or value, and rounded once, as the CPU kernels do (tensor/ops/cpu/copy_kernels.cpp).
#include "tensor/ops/cuda/launch.cuh"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "core/dispatch.h"

namespace lockstep::cuda {

namespace {

template <class Out, class In>
__global__ void copy_elements(int64_t n, StridedOffsets<2> walk, Out* out, const In* in) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[2];
    walk.at(i, at);
    out[at[0]] = convert<Out>(in[at[1]]);
  }
}

template <class T>
__global__ void fill_elements(int64_t n, StridedOffsets<1> walk, T* out, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[1];
    walk.at(i, at);
    out[at[0]] = value;
  }
}

template <class T, class C = device_opmath_t<T>>
__global__ void axpy_elements(int64_t n, StridedOffsets<2> walk, T* out, const T* in, C alpha) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[2];
    walk.at(i, at);
    out[at[0]] = convert<T>(convert<C>(out[at[0]]) + alpha * convert<C>(in[at[1]]));
  }
}

template <class T, class C = device_opmath_t<T>>
__global__ void scale_elements(int64_t n, StridedOffsets<1> walk, T* out, C value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[1];
    walk.at(i, at);
    out[at[0]] = convert<T>(convert<C>(out[at[0]]) * value);
  }
}

// The host-side element type of `dtype` as the device sees it (__half for Half, ...).
template <class Tag>
using device_of = device_type_t<typename Tag::type>;

}  // namespace

void copy_kernel(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const auto walk = make_strided_offsets<2>("copy_", dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape(), "copy_")},
                                            {dst.offset(), src.offset()});
  dispatch_all(dst.dtype(), [&](auto out_tag) {
    using O = device_of<decltype(out_tag)>;
    dispatch_all(src.dtype(), [&](auto in_tag) {
      using I = device_of<decltype(in_tag)>;
      copy_elements<O, I><<<grid_size(n), kBlockSize, 0, stream_for(dst.device())>>>(
          n, walk, static_cast<O*>(dst.storage()->data()), static_cast<const I*>(src.storage()->data()));
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  });
}

void fill_kernel(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const auto walk = make_strided_offsets<1>("fill_", dst.shape(), {dst.strides()}, {dst.offset()});
  dispatch_all(dst.dtype(), [&](auto tag) {
    using Host = typename decltype(tag)::type;
    using T = device_of<decltype(tag)>;
    // Round the value once on the host, exactly as the CPU fill does, then pass its bits.
    const T v = bit_cast_to_device<T>(static_cast<Host>(value));
    fill_elements<T><<<grid_size(n), kBlockSize, 0, stream_for(dst.device())>>>(n, walk, static_cast<T*>(dst.storage()->data()), v);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void axpy_kernel(double alpha, const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const auto walk = make_strided_offsets<2>("add_", dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape(), "add_")},
                                            {dst.offset(), src.offset()});
  dispatch_floating_and_16bit(dst.dtype(), "add_", [&](auto tag) {
    using T = device_of<decltype(tag)>;
    axpy_elements<T><<<grid_size(n), kBlockSize, 0, stream_for(dst.device())>>>(
        n, walk, static_cast<T*>(dst.storage()->data()), static_cast<const T*>(src.storage()->data()),
        static_cast<device_opmath_t<T>>(alpha));
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void scale_kernel(double value, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const auto walk = make_strided_offsets<1>("mul_", dst.shape(), {dst.strides()}, {dst.offset()});
  dispatch_floating_and_16bit(dst.dtype(), "mul_", [&](auto tag) {
    using T = device_of<decltype(tag)>;
    scale_elements<T><<<grid_size(n), kBlockSize, 0, stream_for(dst.device())>>>(
        n, walk, static_cast<T*>(dst.storage()->data()), static_cast<device_opmath_t<T>>(value));
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::cuda
