/// \file
/// Runtime dtype -> compile-time type: kernels are templates, tensors carry a DType value.
/// `dispatch_all(dtype, op, fn)` calls `fn(TypeTag<T>{})` with the C++ type T of `dtype`.
#pragma once

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

/// Calls `fn(TypeTag<T>{})` for the dtypes CPU math kernels compute in (f32, f64); for any other
/// dtype throws "<op>: expected a f32 or f64 tensor, got f16 (convert with .to(DType::f32))".
template <class Fn>
decltype(auto) dispatch_floating(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    default:
      throw Error(detail::concat(op, ": expected a f32 or f64 tensor, got ", dtype_name(dtype),
                                 " (convert with .to(DType::f32))"));
  }
}

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
      throw Error(detail::concat(op, ": ", dtype_name(dtype), " tensors are not supported (convert with .to(DType::f32))"));
  }
}

}  // namespace lockstep
