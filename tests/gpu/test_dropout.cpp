// dropout on a GPU. Both devices draw the mask with the counter-based generator Philox
// (tensor/ops/rules/philox.h), so the GPU's mask is compared with the CPU's bit for bit (every
// floating dtype, odd, tiny and empty sizes, and the op's output); the tests also check what
// defines dropout: the fraction kept is close to 1 - p, survivors are input / (1 - p), the same
// seed gives the same mask, the backward pass uses that mask, p = 0, p = 1 and eval mode; f32
// and f64, odd and tiny sizes, non-contiguous inputs.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "tensor/ops/dispatch/dropout_kernels.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Inputs in [0.5, 1.5): never 0, so a zero in the output always means "dropped".
Tensor nonzero_input(const Shape& shape, uint64_t seed, DType dtype) {
  return (random_cpu(shape, seed, DType::f64) * 0.5 + 1.0).to(dtype).detach();
}

// The rounding a survivor's value may carry: input * scale is one multiplication in the
// element type, where scale = 1 / (1 - p) was itself rounded to it.
double rounding_of(DType dtype) { return dtype == DType::f64 ? 1e-15 : 1e-6; }

// Checks out = mask * x elementwise, with mask in {0, 1 / (1 - p)}; returns how many survived.
int64_t count_survivors(const Tensor& x, const Tensor& out, double p, const std::string& what) {
  const std::vector<double> in = x.to(Device::cpu()).to_vector<double>();
  const std::vector<double> res = out.to(Device::cpu()).to_vector<double>();
  const double scale = 1.0 / (1.0 - p), rtol = 2.0 * rounding_of(x.dtype());
  int64_t kept = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (res[i] == 0.0) continue;
    ++kept;
    if (std::abs(res[i] - in[i] * scale) > rtol * std::abs(in[i] * scale)) {
      ADD_FAILURE() << what << ": element " << i << " is " << res[i] << ", expected 0 or " << in[i] * scale;
      return kept;
    }
  }
  return kept;
}

}  // namespace

TEST(DropoutGpu, TheMaskIsTheCpusForTheSameSeed) {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (double p : {0.1, 0.5, 0.9}) {
      // Odd sizes leave the last group of four partial; 1000003 spreads over many blocks.
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000003}}) {
        const double scale = 1.0 / (1.0 - p);
        const Tensor cpu_mask = empty({n}, TensorOptions().dtype(dtype));
        const Tensor gpu_mask = empty({n}, TensorOptions().dtype(dtype).device(gpu()));
        Generator cpu_generator(31), gpu_generator(31);
        kernels::dropout_mask.call(Device::cpu(), cpu_mask, p, scale, &cpu_generator);
        kernels::dropout_mask.call(gpu(), gpu_mask, p, scale, &gpu_generator);
        const std::string what = std::string("mask ") + dtype_name(dtype) + " p=" + std::to_string(p) +
                                 " n=" + std::to_string(n);
        EXPECT_EQ(gpu_mask.to(Device::cpu()).to_vector<double>(), cpu_mask.to_vector<double>()) << what;
        // Each device took one draw from its generator, so the two move on together.
        EXPECT_EQ(gpu_generator.next(), cpu_generator.next()) << what;
      }
    }
  }
  // Through the op: the same seed drops the same elements of the same input on both devices,
  // and a survivor is one multiplication by the same scale on each.
  const Tensor x = nonzero_input({257, 3}, 8, DType::f32);
  manual_seed(12);
  const std::vector<float> on_cpu = dropout(x, 0.3, true).to_vector<float>();
  manual_seed(12);
  EXPECT_EQ(dropout(x.to(gpu()), 0.3, true).to(Device::cpu()).to_vector<float>(), on_cpu) << "dropout()";
}

TEST(DropoutGpu, KeepsAbout1MinusPAndScalesTheSurvivors) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (double p : {0.1, 0.5, 0.9}) {
      const int64_t n = 1000003;  // odd: the last group of four elements is partial
      const Tensor x = nonzero_input({n}, 1, dtype).to(gpu());
      Generator generator(7);
      const Tensor out = dropout(x, p, true, &generator);
      const std::string what = std::string("dropout ") + dtype_name(dtype) + " p=" + std::to_string(p);
      ASSERT_TRUE(out.device() == gpu()) << what;
      const double kept = static_cast<double>(count_survivors(x, out, p, what)) / static_cast<double>(n);
      // The kept count is binomial: 6 standard deviations, sqrt(p (1 - p) / n) <= 5e-4, is
      // a bound a correct generator practically never exceeds.
      EXPECT_NEAR(kept, 1.0 - p, 6.0 * std::sqrt(p * (1.0 - p) / static_cast<double>(n))) << what;
    }
  }
}

TEST(DropoutGpu, TheSeedFixesTheMask) {
  const Tensor x = nonzero_input({257, 3}, 2, DType::f32).to(gpu());
  Generator a(42), b(42), c(43);
  const std::vector<double> first = dropout(x, 0.5, true, &a).to(Device::cpu()).to_vector<double>();
  EXPECT_EQ(first, dropout(x, 0.5, true, &b).to(Device::cpu()).to_vector<double>()) << "same seed, same mask";
  EXPECT_NE(first, dropout(x, 0.5, true, &c).to(Device::cpu()).to_vector<double>()) << "another seed, another mask";
  // The generator moves on: the next call with `a` draws a new mask.
  EXPECT_NE(first, dropout(x, 0.5, true, &a).to(Device::cpu()).to_vector<double>()) << "the next call";
  // Without a generator the default one is used, and manual_seed fixes it.
  manual_seed(5);
  const std::vector<double> by_default = dropout(x, 0.5, true).to(Device::cpu()).to_vector<double>();
  manual_seed(5);
  EXPECT_EQ(by_default, dropout(x, 0.5, true).to(Device::cpu()).to_vector<double>()) << "manual_seed";
}

TEST(DropoutGpu, BackwardUsesTheSameMask) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double p = 0.3;
    const Tensor x = nonzero_input({33, 17}, 3, dtype).to(gpu()).requires_grad_(true);
    Generator generator(11);
    const Tensor out = dropout(x, p, true, &generator);
    sum(out).backward();
    // d sum(mask * x) / dx = mask: 1 / (1 - p) exactly where the output survived, else 0.
    const std::vector<double> y = out.to(Device::cpu()).to_vector<double>();
    const std::vector<double> g = x.grad().to(Device::cpu()).to_vector<double>();
    const double scale = scalar_like(1.0 / (1.0 - p), x).item();  // rounded to x's dtype
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_EQ(g[i], y[i] != 0.0 ? scale : 0.0) << dtype_name(dtype) << " element " << i;
    }
  }
}

TEST(DropoutGpu, PZeroAndEvalModeReturnTheInputAndPOneGivesZeros) {
  const Tensor x = nonzero_input({5, 7}, 4, DType::f32).to(gpu()).requires_grad_(true);
  expect_close(x, dropout(x, 0.0, true), 0.0, 0.0, "p = 0");
  expect_close(x, dropout(x, 0.5, false), 0.0, 0.0, "eval mode");
  const Tensor out = dropout(x, 1.0, true);
  expect_close(zeros({5, 7}), out, 0.0, 0.0, "p = 1");
  sum(out).backward();
  expect_close(zeros({5, 7}), x.grad(), 0.0, 0.0, "p = 1, gradient");
}

TEST(DropoutGpu, TinyEmptyAndNonContiguousInputs) {
  Generator generator(13);
  for (const Shape& shape : {Shape{0}, Shape{1}, Shape{3}, Shape{5}}) {
    const Tensor x = nonzero_input(shape, 5, DType::f32).to(gpu());
    const Tensor out = dropout(x, 0.5, true, &generator);
    EXPECT_EQ(out.shape(), shape);
    count_survivors(x, out, 0.5, "dropout of shape " + shape_str(shape));
  }
  // A transposed input: the mask has the input's shape, and each output is its own input's.
  const Tensor x = nonzero_input({40, 30}, 6, DType::f32).to(gpu()).t();
  const Tensor out = dropout(x, 0.25, true, &generator);
  EXPECT_EQ(out.shape(), (Shape{30, 40}));
  const int64_t kept = count_survivors(x, out, 0.25, "dropout of a transposed input");
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 1200);
}
