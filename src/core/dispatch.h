/// \file
/// Runtime dtype -> compile-time type: kernels are templates, tensors carry a DType value.
/// `dispatch_all(dtype, op, fn)` calls `fn(TypeTag<T>{})` with the C++ type T of `dtype`.
#pragma once

#include <utility>

#include "core/dtype.h"
#include "core/error.h"

namespace lockstep {

/// Calls `fn(TypeTag<T>{})` for any of the eight dtypes.
template <class Fn>
decltype(auto) dispatch_all(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::f16: return fn(TypeTag<Half>{});
    case DType::bf16: return fn(TypeTag<BFloat16>{});
    case DType::i64: return fn(TypeTag<int64_t>{});
    case DType::i32: return fn(TypeTag<int32_t>{});
    case DType::u8: return fn(TypeTag<uint8_t>{});
    case DType::boolean: return fn(TypeTag<bool>{});
  }
  throw Error("dispatch: unknown dtype");
}

/// Calls `fn(TypeTag<T>{})` for f32 and f64, for the kernels that have no 16-bit version; for
/// f16 or bf16 throws "<op>: has no f16 kernel; expected a f32 or f64 tensor (convert with
/// .to(DType::f32))", and for any other dtype "<op>: expected a f32 or f64 tensor, got i64 ...".
template <class Fn>
decltype(auto) dispatch_floating(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::f16:
    case DType::bf16:
      LOCKSTEP_FAIL(op, ": has no ", dtype_name(dtype), " kernel; expected a f32 or f64 tensor",
                    " (convert with .to(DType::f32))");
    default:
      LOCKSTEP_FAIL(op, ": expected a f32 or f64 tensor, got ", dtype_name(dtype),
                    " (convert with .to(DType::f32))");
  }
}

/// Calls `fn(TypeTag<T>{})` for every floating dtype: f32, f64, and the 16-bit f16 (Half) and
/// bf16 (BFloat16) that mixed precision computes in. A kernel given a 16-bit T reads and writes
/// T but does its arithmetic in `opmath_t<T>` (float). Any other dtype throws "<op>: expected a
/// floating tensor, got i64 (convert with .to(DType::f32))".
template <class Fn>
decltype(auto) dispatch_floating_and_16bit(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::f16: return fn(TypeTag<Half>{});
    case DType::bf16: return fn(TypeTag<BFloat16>{});
    default:
      LOCKSTEP_FAIL(op, ": expected a floating tensor, got ", dtype_name(dtype),
                    " (convert with .to(DType::f32))");
  }
}

/// Calls `fn(TypeTag<T>{})` for the dtypes of dispatch_numeric and the 16-bit floats (f16 as
/// Half, bf16 as BFloat16): every dtype, for kernels such as comparisons that handle them all.
template <class Fn>
decltype(auto) dispatch_numeric_and_16bit(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f16: return fn(TypeTag<Half>{});
    case DType::bf16: return fn(TypeTag<BFloat16>{});
    default: return dispatch_numeric(dtype, op, std::forward<Fn>(fn));
  }
}

/// The type a kernel computes in for element type T: float for the 16-bit floats (their sums,
/// products and accumulators run in f32, as on tensor cores and in PyTorch's `opmath_type`), T
/// itself otherwise.
template <class T>
struct opmath {
  using type = T;  ///< The compute type.
};
/// \cond INTERNAL
template <> struct opmath<Half> { using type = float; };
template <> struct opmath<BFloat16> { using type = float; };
/// \endcond
/// Shorthand for `typename opmath<T>::type`.
template <class T>
using opmath_t = typename opmath<T>::type;

/// Calls `fn(TypeTag<T>{})` for the dtypes CPU comparisons and sums handle (f32, f64, i64, i32,
/// u8, bool); for the 16-bit floats throws a message naming `op`.
template <class Fn>
decltype(auto) dispatch_numeric(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::i64: return fn(TypeTag<int64_t>{});
    case DType::i32: return fn(TypeTag<int32_t>{});
    case DType::u8: return fn(TypeTag<uint8_t>{});
    case DType::boolean: return fn(TypeTag<bool>{});
    default:
      LOCKSTEP_FAIL(op, ": ", dtype_name(dtype), " tensors are not supported (convert with .to(DType::f32))");
  }
}

}  // namespace lockstep
