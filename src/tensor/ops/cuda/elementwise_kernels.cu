// CUDA elementwise kernels; their CPU reference is cpu::binary_kernel / cpu::unary_kernel
// (tensor/ops/cpu/elementwise_kernels.cpp), and both run the formulas of
// tensor/ops/elementwise_math.h:
//   binary: out[i] = f(a[i], b[i])   a, b: any shapes that broadcast to out's shape
//   unary:  out[i] = f(a[i])         a: any layout, out: a's shape
// Two paths, each with one thread per element (or per 4 elements) in a grid-stride loop:
// - dense: f32 operands, all contiguous with one shape, on 16-byte boundaries. Each thread
//   moves 4 floats per load and store (a float4, the widest access a thread can make), so
//   fewer instructions carry the same bytes and the kernel runs at memory bandwidth.
// - strided: any layout and broadcasting; StridedOffsets turns the thread's row-major
//   position into each operand's memory offset, so views need no copies.
#include <cstdint>
#include <type_traits>

#include "tensor/copy.h"
#include "tensor/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/cuda/elementwise_kernels.h"
#include "tensor/ops/elementwise_math.h"

namespace lockstep::cuda {

namespace {

// Floats per float4.
constexpr int kVec = 4;

// Writes four results to out[4v .. 4v+3]: one 16-byte store for f32, single stores otherwise
// (the bool results of comparisons).
template <class Out>
__device__ __forceinline__ void store4(Out* out, int64_t v, Out r0, Out r1, Out r2, Out r3) {
  if constexpr (std::is_same_v<Out, float>) {
    reinterpret_cast<float4*>(out)[v] = make_float4(r0, r1, r2, r3);
  } else {
    Out* p = out + v * kVec;
    p[0] = r0;
    p[1] = r1;
    p[2] = r2;
    p[3] = r3;
  }
}

// a, b, out: (n) contiguous, a and b 16-byte aligned (out too when it is f32).
template <class Out, class F>
__global__ void binary_dense_f32(int64_t n, Out* out, const float* a, const float* b, F f) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t vectors = n / kVec;
  // Thread t handles whole float4s t, t + stride, ...
  for (int64_t v = first; v < vectors; v += int64_t(gridDim.x) * blockDim.x) {
    const float4 x = reinterpret_cast<const float4*>(a)[v];
    const float4 y = reinterpret_cast<const float4*>(b)[v];
    store4<Out>(out, v, f(x.x, y.x), f(x.y, y.y), f(x.z, y.z), f(x.w, y.w));
  }
  // The last n % 4 elements do not fill a float4: threads 0..2 take one each.
  const int64_t tail = vectors * kVec + first;
  if (tail < n) out[tail] = f(a[tail], b[tail]);
}

// a, out: (n) contiguous f32, both 16-byte aligned.
template <class F>
__global__ void unary_dense_f32(int64_t n, float* out, const float* a, F f) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t vectors = n / kVec;
  for (int64_t v = first; v < vectors; v += int64_t(gridDim.x) * blockDim.x) {
    const float4 x = reinterpret_cast<const float4*>(a)[v];
    store4<float>(out, v, f(x.x), f(x.y), f(x.z), f(x.w));
  }
  const int64_t tail = vectors * kVec + first;
  if (tail < n) out[tail] = f(a[tail]);
}

// walk: offsets of (out, a, b) for each of out's n elements (stride 0 where broadcast).
template <class T, class Out, class F>
__global__ void binary_strided(int64_t n, StridedOffsets<3> walk, Out* out, const T* a, const T* b, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[3];
    walk.at(i, at);
    out[at[0]] = f(a[at[1]], b[at[2]]);
  }
}

// walk: offsets of (out, a) for each of out's n elements.
template <class T, class F>
__global__ void unary_strided(int64_t n, StridedOffsets<2> walk, T* out, const T* a, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t at[2];
    walk.at(i, at);
    out[at[0]] = f(a[at[1]]);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether `t` is a dense block of `shape` starting on a 16-byte boundary.
bool dense_aligned(const Tensor& t, const Shape& shape) {
  return t.shape() == shape && t.is_contiguous() && aligned16(t.data());
}

template <class T, class Out, class F>
void launch_binary(const char* name, const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const int64_t n = out.numel();
  cudaStream_t stream = stream_for(out.device());
  if constexpr (std::is_same_v<T, float>) {
    // A bool output is written a byte at a time, so only an f32 one needs aligning.
    const bool out_ok = std::is_same_v<Out, float> ? dense_aligned(out, out.shape()) : out.is_contiguous();
    if (out_ok && dense_aligned(a, out.shape()) && dense_aligned(b, out.shape())) {
      binary_dense_f32<Out><<<grid_size((n + kVec - 1) / kVec), kBlockSize, 0, stream>>>(
          n, out.data_ptr<Out>(), a.data_ptr<float>(), b.data_ptr<float>(), f);
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
  if constexpr (std::is_same_v<T, float>) {
    if (dense_aligned(out, out.shape()) && dense_aligned(a, out.shape())) {
      unary_dense_f32<<<grid_size((n + kVec - 1) / kVec), kBlockSize, 0, stream>>>(n, out.data_ptr<float>(),
                                                                                  a.data_ptr<float>(), f);
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
  // Same dtype rules as the CPU: comparisons on every numeric type, arithmetic on f32 / f64.
  if (out.dtype() == DType::boolean) {
    return dispatch_numeric(a.dtype(), name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      dispatch_comparison(op, [&](auto f) {
        if (out.numel() > 0) launch_binary<T, bool>(name, a, b, out, f);
      });
    });
  }
  dispatch_floating(a.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_arithmetic(op, [&](auto f) {
      if (out.numel() > 0) launch_binary<T, T>(name, a, b, out, f);
    });
  });
}

void unary_kernel(const char* name, UnaryOp op, const Tensor& a, const Tensor& out) {
  dispatch_floating(a.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_unary(op, [&](auto f) {
      if (out.numel() > 0) launch_unary<T>(name, a, out, f);
    });
  });
}

}  // namespace lockstep::cuda
