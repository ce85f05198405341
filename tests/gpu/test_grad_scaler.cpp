// Loss scaling's fused CUDA kernel (unscale and check for inf/NaN in one pass) against the CPU
// kernel, on random gradients of odd sizes (empty, one element, 2-D, a transposed view, over a
// million elements), f32 and f64, clean and with one inf or NaN in any one gradient; then
// GradScaler's step on the GPU against the same step on the CPU.
//
// Both devices multiply each element by the same inverse scale once, a single rounding, so
// the results must agree exactly; the flags must agree too.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "tensor/ops/dispatch/amp_kernels.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Random gradients in [-1, 1) * 1024 of the shapes below, on the CPU; the fourth is transposed.
std::vector<Tensor> random_grads(DType dtype, uint64_t seed) {
  std::vector<Tensor> grads{random_cpu({0}, seed, dtype) * 1024.0, random_cpu({1}, seed + 1, dtype) * 1024.0,
                            random_cpu({17, 31}, seed + 2, dtype) * 1024.0,
                            (random_cpu({33, 7}, seed + 3, dtype) * 1024.0).t(),
                            random_cpu({1000003}, seed + 4, dtype) * 1024.0};
  return grads;
}

// Expects `actual` (on the GPU) to hold exactly the values of `expected` (on the CPU); inf
// matches inf of the same sign and NaN matches NaN, which expect_close's tolerance cannot say.
void expect_same_values(const Tensor& expected, const Tensor& actual, const std::string& what) {
  ASSERT_EQ(expected.shape(), actual.shape()) << what;
  const std::vector<double> e = expected.to_vector<double>(), a = actual.to(Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(e[i]) && std::isnan(a[i])) continue;
    ASSERT_EQ(e[i], a[i]) << what << ": element " << i;
  }
}

// Runs the kernel on `grads` (CPU) and on copies on the GPU, then compares gradients and flags.
void expect_same_unscale(const std::vector<Tensor>& grads, const std::string& what) {
  std::vector<Tensor> on_gpu;
  for (const Tensor& g : grads) on_gpu.push_back(g.to(gpu()));
  const Tensor cpu_found = zeros({1}), gpu_found = zeros({1}, TensorOptions().device(gpu()));
  const double inv_scale = 1.0 / 1024;
  kernels::non_finite_check_and_unscale.call(Device::cpu(), grads, cpu_found, inv_scale);
  kernels::non_finite_check_and_unscale.call(gpu(), on_gpu, gpu_found, inv_scale);
  EXPECT_EQ(cpu_found.item(), gpu_found.item()) << what;
  for (size_t k = 0; k < grads.size(); ++k) expect_same_values(grads[k], on_gpu[k], what);
}

TEST(GradScalerKernel, UnscalesCleanGradientsAsTheCpuDoes) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const std::vector<Tensor> grads = random_grads(dtype, 10);
    expect_same_unscale(grads, dtype_name(dtype));
  }
}

TEST(GradScalerKernel, FindsInfAndNaNAsTheCpuDoes) {
  const double bad_values[] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN()};
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const double bad : bad_values) {
      for (size_t k = 1; k < 5; ++k) {  // every non-empty gradient in turn holds the bad value
        const std::vector<Tensor> grads = random_grads(dtype, 20 + k);
        // The last element in memory order of a contiguous gradient, the first of the view.
        const Tensor flat = grads[k].is_contiguous() ? grads[k].view({grads[k].numel()}) : grads[k].select(0, 0);
        flat.slice(0, flat.numel() - 1, flat.numel()).fill_(bad);
        expect_same_unscale(grads,
                            dtype_name(dtype) + " with " + std::to_string(bad) + " in gradient " + std::to_string(k));
      }
    }
  }
}

TEST(GradScalerKernel, ScalerStepsOnTheGpuAsOnTheCpu) {
  for (const bool overflow : {false, true}) {
    const Tensor value = random_cpu({4099}, 7);
    const Tensor grad = random_cpu({4099}, 8) * 65536.0;
    if (overflow) grad.slice(0, 100, 101).fill_(std::numeric_limits<double>::infinity());
    const Tensor cpu_param = value.clone().requires_grad_(true), gpu_param = value.to(gpu()).requires_grad_(true);
    cpu_param.set_grad(grad.clone());
    gpu_param.set_grad(grad.to(gpu()));
    SGD cpu_sgd({cpu_param}, SGDOptions(0.1)), gpu_sgd({gpu_param}, SGDOptions(0.1));
    GradScaler cpu_scaler, gpu_scaler;
    EXPECT_EQ(cpu_scaler.step(cpu_sgd), !overflow);
    EXPECT_EQ(gpu_scaler.step(gpu_sgd), !overflow);
    cpu_scaler.update();
    gpu_scaler.update();
    EXPECT_EQ(gpu_scaler.get_scale(), cpu_scaler.get_scale());
    expect_close(cpu_param.detach(), gpu_param.detach(), 1e-6, 1e-7, overflow ? "skipped step" : "step");
  }
}

}  // namespace
