// Chapter 1: tensors, views, dtypes and autograd — everything later chapters stand on.
// Run: make chapter1 && ./chapter1
#include <cmath>
#include <iostream>

#include "lockstep.h"
#include "ops/cpu/gemm.h"
#include "util/program.h"
#include "util/timer.h"

using namespace lockstep;

namespace {

void section(const std::string& title) { std::cout << "\n== " << title << " ==\n"; }

// Part 1: a tensor is a view (shape, strides, offset) onto shared storage.
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

// Part 2: dtypes, and what the 16-bit formats of mixed precision do to a number.
void dtypes() {
  section("2. dtypes: f32, f16, bf16");
  //! [dtypes]
  Tensor values = from_vector({0.1, 1.0 / 3.0, 1000.1, 65504.0, 70000.0}, {5});
  std::cout << "f32:           " << values << "\n";
  std::cout << "f16 (10 bits): " << values.to(DType::f16).to(DType::f32) << "   <- 70000 overflows to inf\n";
  std::cout << "bf16 (7 bits): " << values.to(DType::bf16).to(DType::f32) << "   <- same range as f32, fewer digits\n";
  //! [dtypes]
}

// Part 3: autograd on y = relu(w x + b), checked against the derivative done by hand.
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

// Part 4: how fast is the CPU at the operation deep learning is made of?
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 1: tensors, views, dtypes and autograd", "chapter1");
  int threads = 0;
  int64_t size = 1024;
  uint64_t seed = 0;
  std::string device = "cpu";
  app.option_defaults()->always_capture_default();
  app.add_option("--threads", threads, "CPU threads for kernels (default: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--size", size, "matrix size for the matmul timing")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed");
  app.add_option("--device", device, "cpu (the GPU part of this chapter arrives with the CUDA backend)");

  return run_program(app, argc, argv, [&] {
    if (threads > 0) set_num_threads(threads);
    Device::parse(device);  // reject a misspelt device before doing any work
    tensors_and_views();
    dtypes();
    const double grad_error = autograd_example();
    const double gflops = matmul_gflops(size, seed);

    section("5. Devices");
    std::cout << "CUDA devices visible: " << cuda_device_count() << (built_with_cuda() ? "" : " (built without CUDA)")
              << "\nSkipped: the GPU part (Tensor::to(cuda), pinned copies, GPU matmul) is not in this build yet.\n";

    std::cout << "\n" << ResultLine(1).add("device", "cpu").add("threads", get_num_threads()).add("matmul_n", size)
                  .add("matmul_gflops", gflops).add("autograd_max_error", grad_error).add("gpu_part", "skipped").str()
              << std::endl;
    return grad_error < 1e-6 ? 0 : 1;
  });
}
