// cross_entropy and nll_loss on the GPU against the CPU, forward and backward: batch sizes and
// class counts that pick each CUDA thread grouping (C = 10, 1000, 3000), non-contiguous logits
// and targets, large logits, an empty batch, and the GPU's answer to an out-of-range target
// (a NaN loss, since checking on the CPU would stall for the copy).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Tolerances. f32: the CPU and the GPU evaluate e^x and log with different libraries (a few
// ulp apart); row losses and their mean are accumulated in double on both, in a different
// order. f64: the same differences at double precision.
double rtol(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }
double atol(DType dtype) { return dtype == DType::f32 ? 1e-6 : 1e-14; }

const DType kDTypes[] = {DType::f32, DType::f64};

// Class indices for `rows` rows of `classes` classes, spread over all classes.
Tensor targets(int64_t rows, int64_t classes) {
  std::vector<int64_t> t(rows);
  for (int64_t i = 0; i < rows; ++i) t[i] = (i * 7 + 3) % classes;
  return from_vector(t, {rows});
}

struct Size {
  int64_t rows, classes;
};
// One class; a thread per row (C < 32), also with more rows (300) than the block that averages
// the row losses has threads (256); a warp per row (32 <= C < 1024); a block per row.
const Size kSizes[] = {{1, 1}, {4, 10}, {300, 10}, {3, 40}, {64, 1000}, {7, 3000}};

std::string label(const char* op, Size s, DType dtype) {
  return std::string(op) + " N=" + std::to_string(s.rows) + " C=" + std::to_string(s.classes) + " " + dtype_name(dtype);
}

}  // namespace

TEST(GpuLoss, CrossEntropyMatchesCpu) {
  for (DType dtype : kDTypes) {
    for (Size s : kSizes) {
      const Tensor logits = (random_cpu({s.rows, s.classes}, 31, dtype) * 4.0).detach().requires_grad_(true);
      expect_parity([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); },
                    {logits, targets(s.rows, s.classes)}, rtol(dtype), atol(dtype), label("cross_entropy", s, dtype));
    }
  }
}

TEST(GpuLoss, NllLossMatchesCpu) {
  for (DType dtype : kDTypes) {
    for (Size s : kSizes) {
      const Tensor log_probs = random_cpu({s.rows, s.classes}, 37, dtype).requires_grad_(true);
      expect_parity([](const std::vector<Tensor>& in) { return nll_loss(in[0], in[1]); },
                    {log_probs, targets(s.rows, s.classes)}, rtol(dtype), atol(dtype), label("nll_loss", s, dtype));
      // The usual pairing: nll_loss of log_softmax, with gradients through both.
      expect_parity([](const std::vector<Tensor>& in) { return nll_loss(log_softmax(in[0], 1), in[1]); },
                    {log_probs, targets(s.rows, s.classes)}, rtol(dtype), atol(dtype),
                    label("nll_loss of log_softmax", s, dtype));
    }
  }
}

TEST(GpuLoss, NonContiguousLogitsAndTargets) {
  for (DType dtype : kDTypes) {
    // Logits stored as (C, N) and used transposed; every other entry of a longer target.
    const Tensor stored = random_cpu({10, 9}, 41, dtype).requires_grad_(true);
    const Tensor every_other = targets(18, 10);
    for (auto [name, loss] : {std::pair{"cross_entropy", cross_entropy}, std::pair{"nll_loss", nll_loss}}) {
      expect_parity([loss = loss](const std::vector<Tensor>& in) { return loss(in[0].t(), in[1].slice(0, 0, 18, 2)); },
                    {stored, every_other}, rtol(dtype), atol(dtype), std::string(name) + " of strided inputs");
    }
  }
}

TEST(GpuLoss, LargeLogits) {
  // Logits of +-1000: e^x overflows unless the row's max is subtracted first.
  for (DType dtype : kDTypes) {
    const Tensor logits = (random_cpu({16, 10}, 43, dtype) * 1000.0).detach().requires_grad_(true);
    expect_parity([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); },
                  {logits, targets(16, 10)}, rtol(dtype), atol(dtype), "cross_entropy of large logits");
    EXPECT_TRUE(std::isfinite(cross_entropy(logits.to(gpu()), targets(16, 10).to(gpu())).item()));
  }
}

TEST(GpuLoss, EmptyBatchGivesNan) {
  // The mean over no rows is 0 / 0, on both devices (as in PyTorch).
  for (DType dtype : kDTypes) {
    const Tensor logits = random_cpu({0, 10}, 47, dtype).requires_grad_(true);
    for (auto [name, loss] : {std::pair{"cross_entropy", cross_entropy}, std::pair{"nll_loss", nll_loss}}) {
      expect_parity([loss = loss](const std::vector<Tensor>& in) { return loss(in[0], in[1]); },
                    {logits, targets(0, 10)}, rtol(dtype), atol(dtype), std::string(name) + " of an empty batch");
      EXPECT_TRUE(std::isnan(loss(logits.to(gpu()), targets(0, 10).to(gpu())).item())) << name;
    }
  }
}

TEST(GpuLoss, OutOfRangeTargetGivesNan) {
  // The CPU refuses a bad class index up front; the GPU does not stall to look, and instead
  // gives a NaN loss and NaN gradients for the bad row, without touching memory outside the
  // tensors. The good rows' gradients are unaffected.
  for (int64_t bad : {int64_t{10}, int64_t{-1}}) {
    for (auto [name, loss] : {std::pair{"cross_entropy", cross_entropy}, std::pair{"nll_loss", nll_loss}}) {
      const Tensor x = random_cpu({3, 10}, 53).to(gpu()).requires_grad_(true);
      const Tensor result = loss(x, from_vector(std::vector<int64_t>{0, bad, 2}, {3}, TensorOptions().device(gpu())));
      EXPECT_TRUE(std::isnan(result.item())) << name << " with target " << bad;
      result.backward();
      const std::vector<double> grad = x.grad().to(Device::cpu()).to_vector<double>();
      for (int64_t j = 0; j < 10; ++j) {
        EXPECT_FALSE(std::isnan(grad[0 * 10 + j])) << name;
        EXPECT_TRUE(std::isnan(grad[1 * 10 + j])) << name;
        EXPECT_FALSE(std::isnan(grad[2 * 10 + j])) << name;
      }
    }
  }
}
