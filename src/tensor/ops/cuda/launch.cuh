// What every CUDA kernel launcher in Lockstep needs (the dispatch has made its device current):
// a grid size, device-side 16-bit float types, and strided indexing for any layout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "tensor/tensor.h"

namespace lockstep::cuda {

// Threads per block for simple elementwise kernels: a multiple of the 32-thread warp, large
// enough to hide memory latency, small enough for many blocks per multiprocessor.
constexpr int kBlockSize = 256;

// Blocks for a grid-stride loop over n items: one item per thread, up to a cap beyond which
// each thread simply loops (launching millions of blocks gains nothing).
inline unsigned int grid_size(int64_t n, int block = kBlockSize) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, 65536));
}

// Lockstep's host types for the 16-bit floats are plain bit containers; on the device the
// same bits are CUDA's __half and __nv_bfloat16, which the hardware converts.
template <class T> struct device_type { using type = T; };
template <> struct device_type<Half> { using type = __half; };
template <> struct device_type<BFloat16> { using type = __nv_bfloat16; };
template <class T> using device_type_t = typename device_type<T>::type;

// The DType of device element type D: dtype_of, with __half and __nv_bfloat16 mapped back.
template <class D> constexpr DType device_dtype_v = dtype_of<D>::value;
template <> constexpr DType device_dtype_v<__half> = DType::f16;
template <> constexpr DType device_dtype_v<__nv_bfloat16> = DType::bf16;

// Whether D is one of the device's 16-bit floats.
template <class D>
constexpr bool is_16bit_float_v = std::is_same_v<D, __half> || std::is_same_v<D, __nv_bfloat16>;

// The type a kernel computes in for device element type D, as opmath_t (core/dispatch.h) is for
// the host types: float for the 16-bit floats, which are widened on load and rounded once on
// store; D itself otherwise.
template <class D>
using device_opmath_t = std::conditional_t<is_16bit_float_v<D>, float, D>;

// The device pointer with the bits of a host pointer (Half* -> __half*, float* -> float*).
template <class T>
device_type_t<T>* device_ptr(T* p) {
  return reinterpret_cast<device_type_t<T>*>(p);
}
template <class T>
const device_type_t<T>* device_ptr(const T* p) {
  return reinterpret_cast<const device_type_t<T>*>(p);
}

// A host value as the device type with the same bits (Half -> __half, float -> float), for
// passing constants to kernels.
template <class DeviceT, class HostT>
DeviceT bit_cast_to_device(HostT value) {
  static_assert(sizeof(DeviceT) == sizeof(HostT), "host and device types must have the same size");
  DeviceT result;
  std::memcpy(&result, &value, sizeof(result));
  return result;
}

// Converts between any two element types on the device; 16-bit floats go through float with
// round-to-nearest-even, bool is "non-zero".
template <class Out, class In>
__device__ __forceinline__ Out convert(In value) {
  if constexpr (std::is_same_v<In, __half> || std::is_same_v<In, __nv_bfloat16>) {
    return convert<Out>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<Out, __half>) {
    return __float2half_rn(static_cast<float>(value));
  } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(value));
  } else if constexpr (std::is_same_v<Out, bool>) {
    return value != In(0);
  } else {
    return static_cast<Out>(value);
  }
}

// The most dimensions a strided CUDA kernel handles (after merging; PyTorch's limit is 25).
constexpr int kMaxDims = 8;

// Element offsets of N operands walked together over one shape, each with its own strides
// (0 for a broadcast dimension). Passed to kernels by value. Dimensions that are contiguous
// in every operand are merged first, so a dense tensor becomes a single dimension and its
// index computation a single multiply-add.
template <int N>
struct StridedOffsets {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  int64_t offsets[N] = {};

  // Operand k's element offset for the element with row-major position `linear`.
  __device__ __forceinline__ void at(int64_t linear, int64_t (&out)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = offsets[k];
    for (int d = dims - 1; d >= 0; --d) {
      const int64_t index = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) out[k] += index * strides[k][d];
    }
  }
};

// Builds StridedOffsets for `shape`; `op` names the caller in the error for too many dimensions.
template <int N>
StridedOffsets<N> make_strided_offsets(const char* op, const Shape& shape, const std::array<Shape, N>& strides,
                                       const std::array<int64_t, N>& offsets) {
  // Drop size-1 dimensions, then merge dimension d into d+1 wherever every operand steps over
  // d exactly as if d and d+1 were one longer dimension.
  Shape sizes;
  std::array<Shape, N> steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const bool mergeable = [&] {
      if (sizes.empty()) return false;
      for (int k = 0; k < N; ++k) {
        if (steps[k].back() != strides[k][d] * shape[d]) return false;
      }
      return true;
    }();
    if (mergeable) {
      sizes.back() *= shape[d];
      for (int k = 0; k < N; ++k) steps[k].back() = strides[k][d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < N; ++k) steps[k].push_back(strides[k][d]);
    }
  }
  LOCKSTEP_CHECK(static_cast<int>(sizes.size()) <= kMaxDims, op, ": CUDA kernels handle at most ", kMaxDims,
                 " non-mergeable dimensions, got ", sizes.size(), " (make the tensor contiguous() first)");
  StridedOffsets<N> result;
  result.dims = static_cast<int>(sizes.size());
  for (int d = 0; d < result.dims; ++d) {
    result.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) result.strides[k][d] = steps[k][d];
  }
  for (int k = 0; k < N; ++k) result.offsets[k] = offsets[k];
  return result;
}

}  // namespace lockstep::cuda
