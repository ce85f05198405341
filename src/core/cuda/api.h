/// \file
/// How Lockstep declares a function that is implemented in CUDA (a `.cu` file), so that one
/// header serves both builds:
///
///     LOCKSTEP_CUDA_FN(void fill_kernel(const Tensor& dst, double value))
///
/// - In a CUDA build (LOCKSTEP_CUDA defined) this is the plain declaration; the `.cu` file
///   defines the function.
/// - In a CPU-only build (no nvcc) the `.cu` files are not compiled, and the macro instead
///   defines an inline body that throws "Lockstep was built without CUDA". Nothing can reach
///   it in practice (allocating a CUDA tensor fails first), but the program still links, and
///   the declaration is written once.
///
/// Public headers that use it stay free of CUDA types: streams travel as opaque pointers.
#pragma once

namespace lockstep::detail {
/// Throws the error a CPU-only build gives when CUDA code is asked for; `what` names it.
[[noreturn]] void throw_built_without_cuda(const char* what);
}  // namespace lockstep::detail

#if defined(LOCKSTEP_CUDA)
/// Declares a function defined in a `.cu` file (CUDA build).
#define LOCKSTEP_CUDA_FN(...) __VA_ARGS__;
#else
// CPU-only build: a body that throws; its parameters are unused on purpose.
#define LOCKSTEP_CUDA_FN(...)                                                              \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"") \
  [[noreturn]] inline __VA_ARGS__ { ::lockstep::detail::throw_built_without_cuda(__func__); } \
  _Pragma("GCC diagnostic pop")
#endif
