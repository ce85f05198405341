// Helpers for the GPU tests: every CUDA kernel is checked against the CPU kernel, which the
// unit tests check against finite differences and PyTorch. A test builds random CPU inputs,
// runs the same function on the CPU and on cuda:0, and compares outputs and gradients.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lockstep.h"

namespace lockstep::test {

/// With the cache off (LOCKSTEP_NO_CUDA_MEMORY_CACHING=1, as make gpu-check runs memcheck) every
/// free goes back to cudaFree, and the tests of caching have nothing to test.
#define SKIP_WITHOUT_CACHING()                                                                     \
  if (const char* off = std::getenv("LOCKSTEP_NO_CUDA_MEMORY_CACHING"); off && std::string(off) == "1") \
  GTEST_SKIP() << "the cache is off (LOCKSTEP_NO_CUDA_MEMORY_CACHING=1)"

/// The GPU every test runs on.
inline Device gpu() { return Device::cuda(0); }

/// Labels 0..9 for `n` rows, on the CPU, different for each `step`, so that every step of a
/// training test has a different gradient.
inline Tensor class_labels(int64_t n, int step = 0) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i) values.push_back((i * 3 + 1 + step * 7) % 10);
  return from_vector(values, {n});
}

/// Model `name` (make_model) with the weights `seed` gives, in f64, on `device`.
inline std::shared_ptr<Module> f64_model(const std::string& name, Device device, uint64_t seed) {
  manual_seed(seed);
  auto model = make_model(name);
  model->to(DType::f64);
  model->to(device);
  return model;
}

/// Random values in [-1, 1) of `dtype` (never all zero), on the CPU.
inline Tensor random_cpu(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator g(seed);
  return (rand(shape, TensorOptions().dtype(DType::f64), &g) * 2.0 - 1.0).to(dtype).detach();
}

/// Expects `actual` (any device) to match `expected` (the CPU reference) elementwise:
/// |actual - expected| <= atol + rtol * |expected|, with NaN matching NaN. Reports the first
/// mismatch, prefixed by `what`.
inline void expect_close(const Tensor& expected, const Tensor& actual, double rtol, double atol,
                         const std::string& what) {
  ASSERT_EQ(expected.shape(), actual.shape()) << what << ": shapes differ";
  const std::vector<double> e = expected.to(Device::cpu()).to_vector<double>();
  const std::vector<double> a = actual.to(Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(e[i]) && std::isnan(a[i])) continue;
    const double tolerance = atol + rtol * std::abs(e[i]);
    if (!(std::abs(a[i] - e[i]) <= tolerance)) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << " on the GPU but " << e[i]
                    << " on the CPU (tolerance " << tolerance << ")";
      return;
    }
  }
}

/// Expects every named tensor of `actual` (a model's parameters or buffers on cuda:0) to match
/// the same-named one of `expected` (on the CPU) to 1e-9 relative: for f64 runs, where the
/// devices differ only by the order of their additions. `what` prefixes every failure.
inline void expect_same_named_tensors(const std::vector<std::pair<std::string, Tensor>>& expected,
                                      const std::vector<std::pair<std::string, Tensor>>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(expected[i].first, actual[i].first) << what;
    EXPECT_TRUE(actual[i].second.device() == gpu()) << what << ": " << actual[i].first << " left the GPU";
    expect_close(expected[i].second, actual[i].second, 1e-9, 1e-12, what + ": " + expected[i].first);
  }
}

/// Runs `fn` on `inputs` (CPU tensors; those that require grad get gradients) and on copies of
/// them on cuda:0, then compares the outputs and, for a floating output, the gradients of every
/// input that requires grad after backward of sum(output * w) for a fixed random w.
inline void expect_parity(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, double rtol, double atol, const std::string& what) {
  std::vector<Tensor> on_cpu, on_gpu;
  for (const Tensor& x : inputs) {
    on_cpu.push_back(x.detach().clone());
    on_gpu.push_back(x.detach().to(gpu()));
    if (x.requires_grad()) {
      on_cpu.back().requires_grad_(true);
      on_gpu.back().requires_grad_(true);
    }
  }
  const Tensor out_cpu = fn(on_cpu);
  const Tensor out_gpu = fn(on_gpu);
  ASSERT_TRUE(out_gpu.device() == gpu()) << what << ": the result is on " << out_gpu.device();
  expect_close(out_cpu, out_gpu, rtol, atol, what + " (forward)");
  if (!out_cpu.requires_grad()) return;

  const Tensor w = random_cpu(out_cpu.shape(), 4321, out_cpu.dtype());
  sum(mul(out_cpu, w)).backward();
  sum(mul(out_gpu, w.to(gpu()))).backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    ASSERT_TRUE(on_gpu[k].grad().defined()) << what << ": input " << k << " got no gradient on the GPU";
    expect_close(on_cpu[k].grad(), on_gpu[k].grad(), rtol, atol, what + " (gradient of input " + std::to_string(k) + ")");
  }
}

}  // namespace lockstep::test
