/// \file
/// Benchmark of GEMM on a GPU: square f32 `matmul(a, b)` on cuda:0 with each backend of
/// src/tensor/ops/cuda/gemm.cu, cuBLAS and Lockstep's hand-written tiled kernel.
///
/// How to read it: each row is one backend (cublas or tiled, in the name) and one size `n`
/// (C is n x n, 2 * n^3 flops per product). `GFLOP/s` is the useful number. For the tiled
/// kernel, `vs_cublas` is its GFLOP/s divided by cuBLAS's at the same n, measured earlier in
/// the same run (all cuBLAS rows run first). Each timed iteration queues one product and waits
/// for it (lockstep::cuda::synchronize), so a time is the product's, not only its launch's.
///
/// Both backends compute in plain f32: cuBLAS's default math mode does not use TF32 tensor
/// cores. Compare with the GPU's f32 (non-tensor) peak from its data sheet, e.g. about
/// 67 TFLOP/s for an H100 SXM. The tiled kernel keeps each thread's 4 x 4 results in
/// registers, but has none of cuBLAS's larger tiles, double-buffered copies or vector loads.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <map>

#include "lockstep.h"
#include "tensor/ops/cuda/gemm.h"

namespace {

using lockstep::cuda::GemmBackend;

// cuBLAS's GFLOP/s per n, for the tiled rows' ratio.
std::map<int64_t, double> cublas_gflops;

// Argument: n. `backend` is fixed per registration below.
void BM_CudaSgemmSquare(benchmark::State& state, GemmBackend backend) {
  if (lockstep::cuda_device_count() == 0) {
    state.SkipWithError("no usable CUDA device (or Lockstep was built without CUDA)");
    return;
  }
  const int64_t n = state.range(0);
  const lockstep::Device device = lockstep::Device::cuda(0);
  const GemmBackend saved = lockstep::cuda::gemm_backend();
  lockstep::cuda::set_gemm_backend(backend);

  lockstep::Generator generator(42);
  const lockstep::Tensor a = lockstep::rand({n, n}, {}, &generator).to(device);
  const lockstep::Tensor b = lockstep::rand({n, n}, {}, &generator).to(device);
  // One untimed product first: creates the cuBLAS handle, warms the allocator's cache.
  lockstep::matmul(a, b);
  lockstep::cuda::synchronize(device);

  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const lockstep::Tensor c = lockstep::matmul(a, b);
    lockstep::cuda::synchronize(device);
    benchmark::DoNotOptimize(c.data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gflops = 2.0 * static_cast<double>(n) * n * n * static_cast<double>(state.iterations()) / seconds * 1e-9;

  state.counters["GFLOP/s"] = gflops;
  if (backend == GemmBackend::Cublas) {
    cublas_gflops[n] = gflops;
  } else if (cublas_gflops.count(n) != 0) {
    state.counters["vs_cublas"] = gflops / cublas_gflops[n];
  }
  lockstep::cuda::set_gemm_backend(saved);
}

// Registration order is run order: cuBLAS first, so that the tiled rows can report the ratio.
BENCHMARK_CAPTURE(BM_CudaSgemmSquare, cublas, GemmBackend::Cublas)
    ->ArgName("n")
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CudaSgemmSquare, tiled, GemmBackend::Tiled)
    ->ArgName("n")
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
