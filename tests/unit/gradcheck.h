// Finite-difference gradient checking, the test every differentiable op must pass.
//
// For inputs x (float64, requiring grad) and an op f, pick a fixed random tensor w of f's output
// shape and let L(x) = sum(f(x) * w). Autograd gives dL/dx; central differences give
//     (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)
// for every element i of every input. The two must agree: that checks the whole
// vector-Jacobian product the op's backward computes, not just one row of it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "lockstep.h"

namespace lockstep::test {

/// Random float64 values in [-1, 1) that are never all zero, for op inputs.
inline Tensor random_input(const Shape& shape, uint64_t seed, bool requires_grad = true) {
  Generator g(seed);
  Tensor t = rand(shape, TensorOptions().dtype(DType::f64), &g) * 2.0 - 1.0;
  return requires_grad ? t.detach().requires_grad_(true) : t.detach();
}

/// Checks autograd's gradients of `fn` against central differences for every input that
/// requires grad. Returns true on success; failures are reported through gtest.
inline bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> inputs,
                      double eps = 1e-6, double atol = 1e-6, double rtol = 1e-4) {
  // Every input that requires grad becomes a fresh contiguous leaf (so `x + 3.0` may be passed).
  for (Tensor& x : inputs) {
    if (x.requires_grad()) x = x.detach().clone().requires_grad_(true);
  }
  // The weighting w, fixed for the whole check.
  const Tensor probe = fn(inputs);
  Generator g(1234);
  const Tensor w = rand(probe.shape(), TensorOptions().dtype(DType::f64), &g) + 0.5;
  auto loss = [&](const std::vector<Tensor>& xs) { return sum(mul(fn(xs), w)); };

  // Analytic gradients.
  loss(inputs).backward();

  bool ok = true;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    if (!x.grad().defined()) {
      ADD_FAILURE() << "input " << k << " received no gradient";
      ok = false;
      continue;
    }
    const std::vector<double> analytic = x.grad().contiguous().to_vector<double>();
    double* data = x.data_ptr<double>();  // inputs are contiguous float64 leaves
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = data[i];
      data[i] = saved + eps;
      const double plus = loss(inputs).item();
      data[i] = saved - eps;
      const double minus = loss(inputs).item();
      data[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      if (std::fabs(numeric - analytic[i]) > atol + rtol * std::fabs(numeric)) {
        ADD_FAILURE() << "input " << k << " element " << i << ": autograd " << analytic[i] << " vs finite difference "
                      << numeric;
        ok = false;
        if (!ok) return false;  // one clear failure is enough
      }
    }
  }
  return ok;
}

}  // namespace lockstep::test
