// What the GEMM-based GPU tests (matmul, linear, conv2d) share: tolerances for long sums, and
// running a check under every GEMM backend and floating dtype.
#pragma once

#include <algorithm>
#include <functional>
#include <string>

#include "lockstep.h"
#include "tensor/ops/cuda/gemm.h"

namespace lockstep::test {

// Tolerances for results that are sums of `terms` products of values in [-1, 1). The CPU and
// the GPU add the terms in different orders (other blockings, per-image vs whole-chunk GEMMs,
// fused multiply-adds), so they differ by rounding, which grows with the number of terms:
// - f32 (eps 6e-8): relative error up to ~eps * terms, so rtol 1e-4 rising to 1e-3 for long
//   sums, and atol 1e-6 per term for sums that cancel to nearly 0.
// - f64 (eps 1e-16): the same growth stays far below 1e-10 at these sizes.
inline double rtol(DType dtype, int64_t terms) {
  return dtype == DType::f64 ? 1e-10 : std::min(1e-3, 1e-4 + 1e-7 * terms);
}
inline double atol(DType dtype, int64_t terms) { return dtype == DType::f64 ? 1e-10 : 1e-5 + 1e-6 * terms; }

// "cublas" or "tiled", for test messages.
inline std::string backend_name(cuda::GemmBackend backend) {
  return backend == cuda::GemmBackend::Cublas ? "cublas" : "tiled";
}

// Runs `body(dtype, label)` with every GEMM backend selected in turn, for f32 and f64, and
// restores the backend that was selected before.
inline void for_each_setting(const std::function<void(DType, const std::string&)>& body) {
  const cuda::GemmBackend saved = cuda::gemm_backend();
  for (cuda::GemmBackend backend : {cuda::GemmBackend::Cublas, cuda::GemmBackend::Tiled}) {
    cuda::set_gemm_backend(backend);
    for (DType dtype : {DType::f32, DType::f64}) body(dtype, backend_name(backend) + " " + dtype_name(dtype));
  }
  cuda::set_gemm_backend(saved);
}

}  // namespace lockstep::test
