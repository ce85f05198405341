/// \file
/// Benchmark of the 16-bit GEMM on a GPU: square products C = A B on cuda:0 with A and B in
/// bf16 or f16 and C in f32 (cuda::gemm's 16-bit overloads: cublasGemmStridedBatchedEx on
/// tensor cores, f32 sums), beside cuBLAS's plain f32 GEMM (cuda::gemm<float>, SGEMM) on the
/// same sizes. This is the speed mixed precision buys for matmul, linear and conv2d on a GPU.
///
/// How to read it: each row is one operand type (f32, bf16 or f16, in the name) and one size
/// `n` (2 * n^3 flops per product). `GFLOP/s` is the useful number; for the 16-bit rows,
/// `vs_f32` is their GFLOP/s divided by the f32 row's at the same n, measured earlier in the
/// same run (the f32 rows run first). Each timed iteration queues one product and waits for
/// it (lockstep::cuda::synchronize), so a time is the product's, not only its launch's.
///
/// Compare with the GPU's data sheet: an H100 SXM peaks at about 67 TFLOP/s in f32 without
/// tensor cores and about 990 TFLOP/s (dense) in bf16 or f16 with them. Products of a few
/// thousand elements per side stay below those peaks; the ratio is what mixed precision
/// changes.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <type_traits>

#include "lockstep.h"
#include "tensor/ops/cuda/gemm.h"

namespace {

// The f32 GFLOP/s per n, for the 16-bit rows' ratio.
std::map<int64_t, double> f32_gflops;

// Argument: n. T: float, lockstep::BFloat16 or lockstep::Half (the operands' type).
template <class T>
void BM_CudaGemmSquare(benchmark::State& state) {
  if (lockstep::cuda_device_count() == 0) {
    state.SkipWithError("no usable CUDA device (or Lockstep was built without CUDA)");
    return;
  }
  const int64_t n = state.range(0);
  const lockstep::Device device = lockstep::Device::cuda(0);
  const lockstep::DType dtype = lockstep::dtype_of<T>::value;

  lockstep::Generator generator(42);
  const lockstep::Tensor a = lockstep::rand({n, n}, {}, &generator).to(dtype).to(device);
  const lockstep::Tensor b = lockstep::rand({n, n}, {}, &generator).to(dtype).to(device);
  const lockstep::Tensor c = lockstep::empty({n, n}, lockstep::TensorOptions().device(device));  // f32
  auto product = [&] {
    if constexpr (std::is_same_v<T, float>) {
      lockstep::cuda::gemm(n, n, n, 1.0f, a.data_ptr<float>(), n, 1, b.data_ptr<float>(), n, 1, 0.0f,
                           c.data_ptr<float>(), n);
    } else {
      lockstep::cuda::gemm(n, n, n, 1.0f, a.data_ptr<T>(), n, 1, b.data_ptr<T>(), n, 1, 0.0f, c.data_ptr<float>(), n);
    }
  };
  // One untimed product first: creates the cuBLAS handle and lets cuBLAS pick its kernel.
  product();
  lockstep::cuda::synchronize(device);

  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    product();
    lockstep::cuda::synchronize(device);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gflops = 2.0 * static_cast<double>(n) * n * n * static_cast<double>(state.iterations()) / seconds * 1e-9;

  state.counters["GFLOP/s"] = gflops;
  if constexpr (std::is_same_v<T, float>) {
    f32_gflops[n] = gflops;
  } else {
    if (f32_gflops.count(n) != 0) state.counters["vs_f32"] = gflops / f32_gflops[n];
  }
}

// Registration order is run order: f32 first, so that the 16-bit rows can report the ratio.
BENCHMARK_TEMPLATE(BM_CudaGemmSquare, float)
    ->Name("BM_CudaGemmSquare/f32")
    ->ArgName("n")
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_CudaGemmSquare, lockstep::BFloat16)
    ->Name("BM_CudaGemmSquare/bf16")
    ->ArgName("n")
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_CudaGemmSquare, lockstep::Half)
    ->Name("BM_CudaGemmSquare/f16")
    ->ArgName("n")
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
