// CUDA elementwise kernels; their CPU reference is cpu::binary_kernel / cpu::unary_kernel
// (tensor/ops/cpu/elementwise_kernels.cpp), and both run the formulas of
// tensor/ops/rules/elementwise_math.h:
//   binary: out[i] = f(a[i], b[i])   a, b: any shapes that broadcast to out's shape
//   unary:  out[i] = f(a[i])         a: any layout, out: a's shape
// Elements of f16 and bf16 are widened to float (C = device_opmath_t<T>), f runs in float, and
// the result is rounded to the output's dtype once, exactly as on the CPU.
// Two paths, each with one thread per element (or per vector of elements) in a grid-stride loop:
// - dense: f32, f16 or bf16 operands, all contiguous with one shape, on 16-byte boundaries.
//   Each thread moves 16 bytes per load and store (the widest access a thread can make): 4
//   floats, or 8 16-bit values as 4 __half2 / __nv_bfloat162 pairs, which the hardware
//   converts to and from float two at a time. Fewer instructions carry the same bytes and the
//   kernel runs at memory bandwidth; for 16-bit data that is half the bytes of f32.
// - strided: any layout and broadcasting; StridedOffsets turns the thread's row-major
//   position into each operand's memory offset, so views need no copies.
#include <cstdint>
#include <type_traits>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/dispatch/elementwise_kernels.h"
#include "tensor/ops/rules/elementwise_math.h"

namespace lockstep::cuda {

namespace {

// ---- The dense path's vectors --------------------------------------------------------------

// 16 bytes of T as one aligned unit, the dense path's load and store: 4 floats, 8 halves.
template <class T>
struct alignas(16) Vec {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// Two neighbouring 16-bit values as one 32-bit word, the unit the conversion instructions take.
template <class T> struct pair_type;
template <> struct pair_type<__half> { using type = __half2; };
template <> struct pair_type<__nv_bfloat16> { using type = __nv_bfloat162; };

__device__ __forceinline__ float2 pair_to_float2(__half2 p) { return __half22float2(p); }
__device__ __forceinline__ float2 pair_to_float2(__nv_bfloat162 p) { return __bfloat1622float2(p); }

// The float pair (x, y) rounded to nearest even into a 16-bit pair of type P.
template <class P>
__device__ __forceinline__ P float2_to_pair(float x, float y) {
  if constexpr (std::is_same_v<P, __half2>) {
    return __floats2half2_rn(x, y);
  } else {
    return __floats2bfloat162_rn(x, y);
  }
}

// The values of a vector in the compute type C (float for 16-bit T, converted a pair at a time).
template <class T, class C = device_opmath_t<T>>
__device__ __forceinline__ void widen(const Vec<T>& in, C (&out)[Vec<T>::kSize]) {
  if constexpr (is_16bit_float_v<T>) {
    using P = typename pair_type<T>::type;
    const P* pairs = reinterpret_cast<const P*>(in.v);
#pragma unroll
    for (int k = 0; k < Vec<T>::kSize / 2; ++k) {
      const float2 f = pair_to_float2(pairs[k]);
      out[2 * k] = f.x;
      out[2 * k + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int k = 0; k < Vec<T>::kSize; ++k) out[k] = in.v[k];
  }
}

// Stores kSize results r (in f's result type R) at out[kSize * v ...]: one 16-byte store when the
// output has T's size (the arithmetic ops, rounding 16-bit pairs together), single stores for the
// bool results of comparisons, whose vector is not 16 bytes.
template <class T, class Out, class R>
__device__ __forceinline__ void store(Out* out, int64_t v, const R (&r)[Vec<T>::kSize]) {
  constexpr int kSize = Vec<T>::kSize;
  if constexpr (std::is_same_v<Out, T> && is_16bit_float_v<T>) {
    using P = typename pair_type<T>::type;
    Vec<T> result;
    P* pairs = reinterpret_cast<P*>(result.v);
#pragma unroll
    for (int k = 0; k < kSize / 2; ++k) pairs[k] = float2_to_pair<P>(r[2 * k], r[2 * k + 1]);
    reinterpret_cast<Vec<T>*>(out)[v] = result;
  } else if constexpr (std::is_same_v<Out, T>) {
    Vec<T> result;
#pragma unroll
    for (int k = 0; k < kSize; ++k) result.v[k] = r[k];
    reinterpret_cast<Vec<T>*>(out)[v] = result;
  } else {
    Out* p = out + v * kSize;
#pragma unroll
    for (int k = 0; k < kSize; ++k) p[k] = convert<Out>(r[k]);
  }
}

// ---- Kernels -----------------------------------------------------------------------------

// a, b, out: (n) contiguous, a and b 16-byte aligned (out too unless it is bool).
template <class T, class Out, class F>
__global__ void binary_dense(int64_t n, Out* out, const T* a, const T* b, F f) {
  using C = device_opmath_t<T>;
  using R = decltype(f(C(), C()));
  constexpr int kSize = Vec<T>::kSize;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t vectors = n / kSize;
  // Thread t handles whole vectors t, t + stride, ...
  for (int64_t v = first; v < vectors; v += int64_t(gridDim.x) * blockDim.x) {
    C x[kSize], y[kSize];
    widen(reinterpret_cast<const Vec<T>*>(a)[v], x);
    widen(reinterpret_cast<const Vec<T>*>(b)[v], y);
    R r[kSize];
#pragma unroll
    for (int k = 0; k < kSize; ++k) r[k] = f(x[k], y[k]);
    store<T, Out>(out, v, r);
  }
  // The last n % kSize elements do not fill a vector: the first threads take one each.
  const int64_t tail = vectors * kSize + first;
  if (tail < n) out[tail] = convert<Out>(f(convert<C>(a[tail]), convert<C>(b[tail])));
}

// a, out: (n) contiguous, both 16-byte aligned.
template <class T, class F>
__global__ void unary_dense(int64_t n, T* out, const T* a, F f) {
  using C = device_opmath_t<T>;
  constexpr int kSize = Vec<T>::kSize;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t vectors = n / kSize;
  for (int64_t v = first; v < vectors; v += int64_t(gridDim.x) * blockDim.x) {
    C x[kSize];
    widen(reinterpret_cast<const Vec<T>*>(a)[v], x);
    C r[kSize];
#pragma unroll
    for (int k = 0; k < kSize; ++k) r[k] = f(x[k]);
    store<T, T>(out, v, r);
  }
  const int64_t tail = vectors * kSize + first;
  if (tail < n) out[tail] = convert<T>(f(convert<C>(a[tail])));
}

// walk: offsets of (out, a, b) for each of out's n elements (stride 0 where broadcast).
template <class T, class Out, class F>
__global__ void binary_strided(int64_t n, StridedOffsets<3> walk, Out* out, const T* a, const T* b, F f) {
  using C = device_opmath_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[3];
    walk.at(i, at);
    out[at[0]] = convert<Out>(f(convert<C>(a[at[1]]), convert<C>(b[at[2]])));
  }
}

// walk: offsets of (out, a) for each of out's n elements.
template <class T, class F>
__global__ void unary_strided(int64_t n, StridedOffsets<2> walk, T* out, const T* a, F f) {
  using C = device_opmath_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[2];
    walk.at(i, at);
    out[at[0]] = convert<T>(f(convert<C>(a[at[1]])));
  }
}

// ---- Launchers ---------------------------------------------------------------------------

// The element types with a dense path: f32 and the 16-bit floats, the types training runs in.
// (f64 serves gradient checks, where speed does not matter.)
template <class T>
constexpr bool kHasDensePath = std::is_same_v<T, float> || is_16bit_float_v<T>;

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether `t` is a dense block of `shape` starting on a 16-byte boundary.
bool dense_aligned(const Tensor& t, const Shape& shape) {
  return t.shape() == shape && t.is_contiguous() && aligned16(t.data());
}

// T and Out are device types (__half for f16, ...).
template <class T, class Out, class F>
void launch_binary(const char* name, const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const int64_t n = out.numel();
  cudaStream_t stream = stream_for(out.device());
  if constexpr (kHasDensePath<T>) {
    // A bool output is written a byte at a time, so only an output of T needs aligning.
    const bool out_ok = std::is_same_v<Out, T> ? dense_aligned(out, out.shape()) : out.is_contiguous();
    if (out_ok && dense_aligned(a, out.shape()) && dense_aligned(b, out.shape())) {
      constexpr int kSize = Vec<T>::kSize;
      binary_dense<T, Out><<<grid_size((n + kSize - 1) / kSize), kBlockSize, 0, stream>>>(
          n, static_cast<Out*>(out.data()), static_cast<const T*>(a.data()), static_cast<const T*>(b.data()), f);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  const auto walk = make_strided_offsets<3>(
      name, out.shape(), {out.strides(), broadcast_strides(a, out.shape(), name), broadcast_strides(b, out.shape(), name)},
      {out.offset(), a.offset(), b.offset()});
  binary_strided<T, Out><<<grid_size(n), kBlockSize, 0, stream>>>(n, walk, static_cast<Out*>(out.storage()->data()),
                                                                   static_cast<const T*>(a.storage()->data()),
                                                                   static_cast<const T*>(b.storage()->data()), f);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

template <class T, class F>
void launch_unary(const char* name, const Tensor& a, const Tensor& out, F f) {
  const int64_t n = out.numel();
  cudaStream_t stream = stream_for(out.device());
  if constexpr (kHasDensePath<T>) {
    if (dense_aligned(out, out.shape()) && dense_aligned(a, out.shape())) {
      constexpr int kSize = Vec<T>::kSize;
      unary_dense<T><<<grid_size((n + kSize - 1) / kSize), kBlockSize, 0, stream>>>(
          n, static_cast<T*>(out.data()), static_cast<const T*>(a.data()), f);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  const auto walk = make_strided_offsets<2>(name, out.shape(), {out.strides(), a.strides()}, {out.offset(), a.offset()});
  unary_strided<T><<<grid_size(n), kBlockSize, 0, stream>>>(n, walk, static_cast<T*>(out.storage()->data()),
                                                            static_cast<const T*>(a.storage()->data()), f);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void binary_kernel(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  // Same dtype rules as the CPU: comparisons on every numeric type, arithmetic on the floating
  // ones (f32, f64, f16, bf16).
  if (out.dtype() == DType::boolean) {
    return dispatch_numeric_and_16bit(a.dtype(), name, [&](auto tag) {
      using T = device_type_t<typename decltype(tag)::type>;
      dispatch_comparison(op, [&](auto f) {
        if (out.numel() > 0) launch_binary<T, bool>(name, a, b, out, f);
      });
    });
  }
  dispatch_floating_and_16bit(a.dtype(), name, [&](auto tag) {
    using T = device_type_t<typename decltype(tag)::type>;
    dispatch_arithmetic(op, [&](auto f) {
      if (out.numel() > 0) launch_binary<T, T>(name, a, b, out, f);
    });
  });
}

void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out) {
  dispatch_floating_and_16bit(a.dtype(), name, [&](auto tag) {
    using T = device_type_t<typename decltype(tag)::type>;
    dispatch_unary(op, [&](auto f) {
      if (out.numel() > 0) launch_unary<T>(name, a, out, f);
    });
  });
}

}  // namespace lockstep::cuda
