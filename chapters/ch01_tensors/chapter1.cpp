// Chapter 1: tensors, views, dtypes and autograd — everything later chapters stand on — then
// devices: moving tensors and modules to a GPU, pinned memory, and why training runs there.
// Run: make chapter1 && ./chapter1
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <vector>

#include <unistd.h>

#include "common/model_flops.h"
#include "common/program.h"
#include "lockstep.h"
#include "tensor/ops/cuda/gemm.h"
#include "util/timer.h"

using namespace lockstep;

namespace {

void section(const std::string& title) { std::cout << "\n== " << title << " ==\n"; }

// A tensor is a view (shape, strides, offset) onto shared storage.
void tensors_and_views() {
  section("1. Tensors and views");
  //! [views]
  Tensor x = arange(0, 6).reshape({2, 3});  // x: (2, 3), row-major
  Tensor xt = x.t();                        // xt: (3, 2), the same memory read column-first
  std::cout << "x = " << x << "\n  shape " << shape_str(x.shape()) << ", strides " << shape_str(x.strides()) << "\n";
  std::cout << "x.t() = " << xt << "\n  shape " << shape_str(xt.shape()) << ", strides " << shape_str(xt.strides())
            << ", contiguous: " << (xt.is_contiguous() ? "yes" : "no") << "\n";
  // Writing through a view changes the original: they share one Storage.
  xt.select(0, 2).fill_(-1.0);  // column 2 of x
  std::cout << "after xt[2] = -1, x = " << x << "\n";
  std::cout << "same storage: " << (x.storage() == xt.storage() ? "yes" : "no")
            << "; xt.contiguous() copies: " << (xt.contiguous().storage() != x.storage() ? "yes" : "no") << "\n";
  //! [views]
}

// dtypes, and what the 16-bit formats of mixed precision do to a number.
void dtypes() {
  section("2. dtypes: f32, f16, bf16");
  //! [dtypes]
  Tensor values = from_vector({0.1, 1.0 / 3.0, 1000.1, 65504.0, 70000.0}, {5});
  std::cout << "f32:           " << values << "\n";
  std::cout << "f16 (10 bits): " << values.to(DType::f16).to(DType::f32) << "   <- 70000 overflows to inf\n";
  std::cout << "bf16 (7 bits): " << values.to(DType::bf16).to(DType::f32) << "   <- same range as f32, fewer digits\n";
  //! [dtypes]
}

// Autograd on y = relu(w x + b), checked against the derivative done by hand.
double autograd_example() {
  section("3. Autograd: y = sum(relu(w * x + b))");
  //! [autograd]
  Tensor w = from_vector({0.5, -2.0, 1.5}, {3}).requires_grad_();
  Tensor b = from_vector({0.1, 0.2, -5.0}, {3}).requires_grad_();
  Tensor x = from_vector({2.0, 1.0, 3.0}, {3});
  // The hook fires once w's gradient is complete: DDP will start an all-reduce from here.
  w.register_post_accumulate_grad_hook([](const Tensor& leaf) { std::cout << "  hook: w.grad is ready: " << leaf.grad() << "\n"; });
  Tensor y = sum(relu(w * x + b));  // y = relu(1.1) + relu(-1.8) + relu(-0.5) = 1.1
  std::cout << "y = " << y << "\n";
  y.backward();
  // dy/dw_i = x_i where w_i x_i + b_i > 0, else 0; dy/db_i = 1 where it is > 0.
  std::cout << "w.grad = " << w.grad() << "   (by hand: [2, 0, 0])\n";
  std::cout << "b.grad = " << b.grad() << "   (by hand: [1, 0, 0])\n";
  //! [autograd]
  const std::vector<double> expected{2.0, 0.0, 0.0};
  double error = 0.0;
  for (int i = 0; i < 3; ++i) error = std::max(error, std::fabs(w.grad()[i].item() - expected[i]));
  return error;
}

// 3, continued. Backward reads what the forward pass saved; an in-place change made in between
// is caught by the data's version count. Returns whether backward refused, as it must.
bool saved_tensor_example() {
  //! [saved tensors]
  Tensor w = from_vector({0.5, -2.0, 1.5}, {3}).requires_grad_();
  Tensor x = from_vector({2.0, 1.0, 3.0}, {3});
  Tensor y = sum(w * x);  // MulBackward saves x: it is w's gradient
  std::cout << "x.version() = " << x.version() << " when saved\n";
  x.fill_(0.0);  // the next batch, written into the same tensor before backward
  std::cout << "x.version() = " << x.version() << " after x.fill_(0)\n";
  try {
    y.backward();
  } catch (const Error& e) {
    std::cout << "y.backward() refused: " << e.what() << "\n";
    return true;
  }
  //! [saved tensors]
  std::cout << "y.backward() ran with a changed x: its gradient is wrong\n";
  return false;
}

// How fast is the CPU at the operation deep learning is made of?
// The timing holds three n x n f32 matrices (a, b and the product): refused before any work
// when they need more than this machine's memory, rather than failing or swapping half-way.
void check_matmul_fits(int64_t n) {
  const double needed = 3.0 * 4.0 * static_cast<double>(n) * static_cast<double>(n);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const double gib = double(1 << 30);
  LOCKSTEP_CHECK(memory <= 0.0 || needed <= memory, "--size ", n, ": the timing needs three ", n, "x", n,
                 " f32 matrices, about ", std::llround(needed / gib), " GiB, and this machine has about ",
                 std::llround(memory / gib), " GiB of memory; use a smaller --size");
}

double matmul_gflops(int64_t n, uint64_t seed) {
  section("4. Matrix multiply on the CPU");
  //! [matmul]
  Generator generator(seed);
  Tensor a = randn({n, n}, {}, &generator), b = randn({n, n}, {}, &generator);
  matmul(a, b);  // warm-up: first touch of the memory, thread start-up
  Timer timer;
  const int repeats = 5;
  for (int i = 0; i < repeats; ++i) matmul(a, b);
  const double seconds = timer.seconds() / repeats;
  const double gflops = 2.0 * n * n * n / seconds / 1e9;  // n^3 multiply-adds = 2 n^3 flops
  //! [matmul]
  std::cout << n << "x" << n << " f32 matmul: " << seconds * 1e3 << " ms, " << gflops << " GFLOP/s on "
            << get_num_threads() << " thread(s)\n";
  return gflops;
}

// ---- Part 2: devices ------------------------------------------------------------------------

// The GPU part 2 runs on, or why it is skipped. Decided before part 1 runs, so that a GPU asked
// for by name but unusable is an error at once rather than after the CPU timings.
struct GpuChoice {
  std::optional<Device> gpu;
  std::string skipped_because;
};

GpuChoice choose_gpu(const std::string& flag) {
  if (flag == "auto") {
    if (!built_with_cuda()) return {std::nullopt, "Lockstep was built without CUDA"};
    if (cuda_device_count() == 0) return {std::nullopt, "this machine has no usable CUDA device"};
    return {Device::cuda(0), ""};
  }
  const Device device = Device::parse(flag);
  if (device.is_cpu()) return {std::nullopt, "--device cpu asked for the CPU only"};
  empty({1}, TensorOptions().device(device));  // says why the device cannot be used, if it cannot
  return {device, ""};
}

// Seconds per call of `work`, averaged over `repeats` calls after one warm-up call. GPU work is
// only queued when a call returns, so on a GPU the clock stops after synchronize(): the time is
// the time the work took, not the time it took to queue it.
double seconds_per_call(std::optional<Device> gpu, int repeats, const std::function<void()>& work) {
  work();
  if (gpu) cuda::synchronize(*gpu);
  Timer timer;
  for (int i = 0; i < repeats; ++i) work();
  if (gpu) cuda::synchronize(*gpu);
  return timer.seconds() / repeats;
}

// Tensor::to makes a copy; Module::to moves the module's own tensors.
void to_device(Device gpu) {
  section("5. Tensor::to and Module::to");
  //! [to device]
  Tensor on_cpu = arange(0, 4);
  Tensor on_gpu = on_cpu.to(gpu);  // a new tensor with its own storage in GPU memory
  std::cout << "on_cpu is on " << on_cpu.device() << ", data at " << on_cpu.data() << "\n"
            << "on_gpu is on " << on_gpu.device() << ", data at " << on_gpu.data() << ": " << on_gpu << "\n"
            << "on_cpu is still on the CPU: " << (on_cpu.device().is_cpu() ? "yes" : "no") << "\n";
  // A module is moved in place: the same parameter objects, their data now on the GPU.
  Linear layer(4, 2);
  const Tensor weight = layer.parameters()[0];
  std::cout << "layer.weight before layer.to(" << gpu << "): " << weight.device();
  layer.to(gpu);
  std::cout << "; after: " << weight.device()
            << "; still the same tensor object: " << (layer.parameters()[0].is_same(weight) ? "yes" : "no") << "\n";
  //! [to device]
  section("6. Mixing devices is an error");
  //! [mixing devices]
  try {
    add(on_cpu, on_gpu);
  } catch (const Error& e) {
    std::cout << "add(on_cpu, on_gpu) throws: " << e.what() << "\n";
  }
  //! [mixing devices]
}

// Host-to-device copies from pageable and from pinned memory.
struct Bandwidth {
  double pageable_gbps = 0.0;
  double pinned_gbps = 0.0;
};

Bandwidth copy_bandwidth(Device gpu) {
  section("7. Copying to the GPU: pageable vs pinned memory");
  //! [pinned]
  const int64_t bytes = int64_t{256} << 20;  // 256 MiB of f32
  const Tensor pageable = full({bytes / 4}, 1.0);
  const Tensor pinned = pageable.pin_memory();  // page-locked: the GPU reads it directly
  const int repeats = 5;
  const double pageable_s = seconds_per_call(gpu, repeats, [&] { pageable.to(gpu); });
  const double pinned_s = seconds_per_call(gpu, repeats, [&] { pinned.to(gpu); });
  // non_blocking only queues the copy: the CPU is free until it needs the data.
  Timer queued;
  const Tensor arriving = pinned.to(gpu, /*non_blocking=*/true);
  const double returned_s = queued.seconds();
  cuda::synchronize(gpu);
  const double arrived_s = queued.seconds();
  //! [pinned]
  const Bandwidth result{bytes / pageable_s / 1e9, bytes / pinned_s / 1e9};
  std::printf("256 MiB host -> %s, mean of %d copies:\n", gpu.str().c_str(), repeats);
  std::printf("  pageable: %7.2f ms  %6.1f GB/s\n", pageable_s * 1e3, result.pageable_gbps);
  std::printf("  pinned:   %7.2f ms  %6.1f GB/s  (%.1fx)\n", pinned_s * 1e3, result.pinned_gbps, pageable_s / pinned_s);
  std::printf("  pinned, non_blocking: to() returned after %.3f ms; the data had arrived after %.2f ms\n",
              returned_s * 1e3, arrived_s * 1e3);
  return result;
}

// One matrix multiply, timed on the CPU and on the GPU with both GEMM backends.
struct MatmulTimes {
  int64_t n = 0;
  double cpu_s = 0.0;
  bool cpu_estimated = false;  // from the previous size by the n^3 law
  double cublas_s = 0.0;
  double tiled_s = 0.0;
};

std::vector<MatmulTimes> cpu_vs_gpu_matmul(Device gpu, bool measure_cpu_4096, uint64_t seed) {
  section("8. Matrix multiply: CPU vs GPU");
  const cuda::GemmBackend previous_backend = cuda::gemm_backend();
  std::vector<MatmulTimes> rows;
  for (const int64_t n : {int64_t{1024}, int64_t{2048}, int64_t{4096}}) {
    //! [gpu matmul]
    Generator generator(seed);
    const Tensor a = randn({n, n}, {}, &generator), b = randn({n, n}, {}, &generator);
    const Tensor a_gpu = a.to(gpu), b_gpu = b.to(gpu);
    MatmulTimes row;
    row.n = n;
    cuda::set_gemm_backend(cuda::GemmBackend::Cublas);
    row.cublas_s = seconds_per_call(gpu, 10, [&] { matmul(a_gpu, b_gpu); });
    cuda::set_gemm_backend(cuda::GemmBackend::Tiled);  // the shared-memory kernel written to be read
    row.tiled_s = seconds_per_call(gpu, 10, [&] { matmul(a_gpu, b_gpu); });
    //! [gpu matmul]
    // n^3 multiply-adds: at 4096 the CPU needs 8x its 2048 time, which the default run does
    // not spend; it estimates that time from 2048 instead, and says so.
    if (n < 4096 || measure_cpu_4096) {
      row.cpu_s = seconds_per_call(std::nullopt, 3, [&] { matmul(a, b); });
    } else {
      row.cpu_s = rows.back().cpu_s * 8.0;
      row.cpu_estimated = true;
    }
    rows.push_back(row);
  }
  cuda::set_gemm_backend(previous_backend);

  const auto tflops = [](int64_t n, double seconds) { return 2.0 * n * n * n / seconds / 1e12; };
  std::printf("f32, %d CPU thread(s), %s; ms per matmul (TFLOP/s):\n", get_num_threads(), cuda::device_name(gpu).c_str());
  std::printf("  %4s  %18s  %16s  %16s  %10s  %12s\n", "n", "CPU", "cuBLAS", "tiled kernel", "CPU/cuBLAS", "tiled/cuBLAS");
  for (const MatmulTimes& r : rows) {
    std::printf("  %4lld  %s%9.1f (%5.2f)  %8.3f (%5.1f)  %8.3f (%5.1f)  %9.0fx  %11.1fx\n", static_cast<long long>(r.n),
                r.cpu_estimated ? "~" : " ", r.cpu_s * 1e3, tflops(r.n, r.cpu_s), r.cublas_s * 1e3, tflops(r.n, r.cublas_s),
                r.tiled_s * 1e3, tflops(r.n, r.tiled_s), r.cpu_s / r.cublas_s, r.tiled_s / r.cublas_s);
  }
  if (rows.back().cpu_estimated) {
    std::printf("  ~ estimated: the 2048 time x 8 (n^3 work); run with --cpu-4096 to measure it\n");
  }
  return rows;
}

// The question this part answers, with the ratio just measured.
void why_train_on_a_gpu(const MatmulTimes& largest) {
  section("9. Why train on a GPU?");
  const double ratio = largest.cpu_s / largest.cublas_s;
  std::printf("At n=%lld one matrix multiply is %.0fx faster on the GPU (cuBLAS) than on this CPU%s.\n"
              "Training is mostly matrix multiplies, so matrix work that takes 20 minutes here takes about %.1f s "
              "there.\n(The rest of a step, elementwise ops and copies, gains less: it is bound by memory bandwidth.)\n",
              static_cast<long long>(largest.n), ratio, largest.cpu_estimated ? " (CPU time estimated)" : "",
              20.0 * 60.0 / ratio);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 1: tensors, views, dtypes, autograd and devices", "chapter1");
  int threads = 0;
  int64_t size = 1024;
  uint64_t seed = 0;
  std::string device = "auto";
  bool cpu_4096 = false;
  app.option_defaults()->always_capture_default();
  app.add_option("--threads", threads, "CPU threads for kernels (default: all cores)")->check(thread_count());
  app.add_option("--size", size, "matrix size for the CPU matmul timing of part 1")->check(positive_number());
  app.add_option("--seed", seed, "random seed")->check(non_negative_number());
  app.add_option("--device", device,
                 "the GPU for part 2: cuda or cuda:N; cpu skips part 2; auto uses cuda:0 when there is one");
  app.add_flag("--cpu-4096", cpu_4096, "in part 2, time the CPU matmul at n=4096 too instead of estimating it");

  return run_program(app, argc, argv, [&] {
    if (threads > 0) set_num_threads(threads);
    check_matmul_fits(size);
    const GpuChoice choice = choose_gpu(device);
    std::cout << "Part 1: tensors\n";
    tensors_and_views();
    dtypes();
    const double grad_error = autograd_example();
    const bool change_caught = saved_tensor_example();
    const double gflops = matmul_gflops(size, seed);

    std::cout << "\nPart 2: devices\n";
    ResultLine result(1);
    // Chapter 1 trains nothing: its MFU is the matmul's, a fraction of the cores' f32 peak.
    const double mfu = gflops * 1e9 / rank_peak_flops(Device::cpu(), DType::f32, get_num_threads());
    result.add("device", choice.gpu ? choice.gpu->str() : "cpu").add("threads", get_num_threads()).add("matmul_n", size)
        .add("matmul_gflops", gflops).add("mfu", mfu).add("autograd_max_error", grad_error);
    if (!choice.gpu) {
      std::cout << "CUDA devices visible: " << cuda_device_count() << "\nSkipped part 2 (Tensor::to(cuda), "
                << "pinned copies, CPU vs GPU matmul): " << choice.skipped_because << ".\n";
      result.add("gpu_part", "skipped");
    } else {
      const Device gpu = *choice.gpu;
      std::cout << "GPU: " << gpu << ", " << cuda::device_name(gpu) << "\n";
      to_device(gpu);
      const Bandwidth bandwidth = copy_bandwidth(gpu);
      const std::vector<MatmulTimes> times = cpu_vs_gpu_matmul(gpu, cpu_4096, seed);
      why_train_on_a_gpu(times.back());
      const cuda::MemoryStats memory = cuda::memory_stats(gpu);
      std::cout << "\nThe caching allocator served " << memory.cache_hits << " GPU allocations from its cache and called "
                << "cudaMalloc " << memory.cuda_mallocs << " times (peak " << (memory.peak_allocated_bytes >> 20)
                << " MiB).\n";
      const MatmulTimes& largest = times.back();
      result.add("gpu_part", "measured").add("h2d_pageable_gbps", bandwidth.pageable_gbps)
          .add("h2d_pinned_gbps", bandwidth.pinned_gbps).add("gemm_n", largest.n)
          .add("cpu_gemm_ms", largest.cpu_s * 1e3).add("cpu_gemm", largest.cpu_estimated ? "estimated" : "measured")
          .add("cublas_gemm_ms", largest.cublas_s * 1e3).add("tiled_gemm_ms", largest.tiled_s * 1e3)
          .add("gpu_speedup", largest.cpu_s / largest.cublas_s);
    }
    std::cout << "\n" << result.str() << std::endl;
    return grad_error < 1e-6 && change_caught ? 0 : 1;
  });
}
