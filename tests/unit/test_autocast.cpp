// Tests for autocast (src/tensor/autocast.h): which dtype each op runs in inside a region,
// nesting and disabled regions, the cast cache, master weights that stay f32, and the 16-bit
// matmul, linear and conv2d against f32 on the same values.
//
// Tolerance of a 16-bit product against f32. The inputs are bf16 (or f16) values on both
// sides, so every product is exact in f32; the K products are summed in f32 in some order on
// each side, within (K + 2) u32 S of the exact sum, where u32 = 2^-24 and S = sum |a b| (+ |bias|)
// (Higham, 4.2). The 16-bit result is then rounded once, adding at most u16 |exact| with u16 =
// 2^-8 for bf16 and 2^-11 for f16. So |y16 - y32| <= u16 |y32| + 2 (K + 2) u32 S (+ u16 u32 S,
// absorbed by using 3 instead of 2).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lockstep.h"
#include "test_util.h"

namespace lockstep {
namespace {

using test::expect_error;

constexpr double kU32 = 1.0 / (1 << 24);

double unit_roundoff(DType dtype) { return dtype == DType::bf16 ? 1.0 / (1 << 8) : 1.0 / (1 << 11); }

// A random f32 tensor whose values are exactly representable in `dtype`.
Tensor representable(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {}, &gen).to(dtype).to(DType::f32);
}

// |t| elementwise (Lockstep has no abs op yet): relu(t) + relu(-t).
Tensor magnitude(const Tensor& t) { return relu(t) + relu(neg(t)); }

// Checks y16 against y32 with the bound in this file's header; `sum_abs` is S per element and
// K the length of each sum.
void expect_within_bound(const Tensor& y16, const Tensor& y32, const Tensor& sum_abs, int64_t K, DType dtype) {
  const std::vector<float> a = y16.to(DType::f32).contiguous().to_vector<float>();
  const std::vector<float> b = y32.contiguous().to_vector<float>();
  const std::vector<float> s = sum_abs.contiguous().to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double bound = unit_roundoff(dtype) * std::fabs(b[i]) + 3.0 * (K + 2) * kU32 * s[i];
    ASSERT_LE(std::fabs(double(a[i]) - double(b[i])), bound) << "element " << i << " of " << a.size();
  }
}

TEST(Autocast, LowerPrecisionOpsRunInTheRegionsDtype) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor x = randn({4, 3, 6, 6});
    const Tensor w = randn({5, 3, 3, 3}, TensorOptions().requires_grad(true));
    const Tensor fc = randn({7, 12}, TensorOptions().requires_grad(true));
    const AutocastGuard region(DeviceType::CPU, dtype);
    EXPECT_EQ(conv2d(x, w, Tensor(), 1, 0).dtype(), dtype);
    EXPECT_EQ(linear(randn({2, 12}), fc, Tensor()).dtype(), dtype);
    EXPECT_EQ(matmul(randn({2, 12}), randn({12, 3})).dtype(), dtype);
  }
}

TEST(Autocast, OtherOpsKeepTheirInputsDtypeAndF32OpsRunInF32) {
  const AutocastGuard region(DeviceType::CPU, DType::bf16);
  const Tensor h = randn({3, 4}).to(DType::bf16);
  EXPECT_EQ(relu(h).dtype(), DType::bf16);
  EXPECT_EQ(max_pool2d(randn({1, 1, 4, 4}).to(DType::bf16), 2).dtype(), DType::bf16);
  EXPECT_EQ(h.view({12}).dtype(), DType::bf16);
  EXPECT_EQ(exp(h).dtype(), DType::f32);
  EXPECT_EQ(log(relu(h) + h.to(DType::f32)).dtype(), DType::f32);
  // Binary ops of two floating dtypes promote to the wider one, as everywhere.
  EXPECT_EQ(add(h, randn({3, 4})).dtype(), DType::f32);
  EXPECT_EQ(mul(h, randn({3, 4}).to(DType::f16)).dtype(), DType::f32);
  EXPECT_EQ(add(h, h).dtype(), DType::bf16);
  // f64 is left alone: autocast lowers only f32.
  EXPECT_EQ(matmul(randn({2, 2}, TensorOptions().dtype(DType::f64)), randn({2, 2}, TensorOptions().dtype(DType::f64))).dtype(),
            DType::f64);
}

TEST(Autocast, OutsideARegionNothingIsCast) {
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(linear(randn({2, 3}), randn({4, 3}), randn({4})).dtype(), DType::f32);
  {
    const AutocastGuard region(DeviceType::CPU, DType::bf16);
    EXPECT_TRUE(is_autocast_enabled(DeviceType::CPU));
    // A CUDA region is a different setting: CPU ops are not touched by it, and vice versa.
    EXPECT_FALSE(is_autocast_enabled(DeviceType::CUDA));
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(matmul(randn({2, 3}), randn({3, 4})).dtype(), DType::f32);
}

TEST(Autocast, RegionsNestAndADisabledRegionRunsInTheInputsDtypes) {
  const Tensor a = randn({2, 3}), b = randn({3, 4});
  const AutocastGuard outer(DeviceType::CPU, DType::bf16);
  EXPECT_EQ(matmul(a, b).dtype(), DType::bf16);
  {
    const AutocastGuard off(DeviceType::CPU, DType::bf16, false);
    EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(matmul(a, b).dtype(), DType::f32);
    {
      const AutocastGuard inner(DeviceType::CPU, DType::f16);
      EXPECT_EQ(get_autocast_dtype(DeviceType::CPU), DType::f16);
      EXPECT_EQ(matmul(a, b).dtype(), DType::f16);
    }
    EXPECT_EQ(matmul(a, b).dtype(), DType::f32);
  }
  EXPECT_EQ(get_autocast_dtype(DeviceType::CPU), DType::bf16);
  EXPECT_EQ(matmul(a, b).dtype(), DType::bf16);
}

TEST(Autocast, AParameterIsCastOncePerRegion) {
  Linear layer(6, 4);
  const Tensor x = randn({3, 6});
  {
    const AutocastGuard region(DeviceType::CPU, DType::bf16);
    EXPECT_EQ(autocast_cache_size(), 0u);
    const Tensor y1 = layer(x);
    // The weight and the bias: two casts, then no more however often the layer runs.
    EXPECT_EQ(autocast_cache_size(), 2u);
    const Tensor y2 = layer(x);
    EXPECT_EQ(autocast_cache_size(), 2u);
    EXPECT_TRUE(autocast::to_lower_precision(layer.weight).is_same(autocast::to_lower_precision(layer.weight)));
    // Activations are not cached: each use is a new tensor anyway.
    const Tensor h = relu(y1).to(DType::f32);
    EXPECT_FALSE(autocast::to_lower_precision(h).is_same(autocast::to_lower_precision(h)));
    EXPECT_EQ(autocast_cache_size(), 2u);
  }
  EXPECT_EQ(autocast_cache_size(), 0u);
}

TEST(Autocast, AParameterChangedInPlaceIsCastAgain) {
  const Tensor w = randn({2, 2}, TensorOptions().requires_grad(true));
  const AutocastGuard region(DeviceType::CPU, DType::bf16);
  const Tensor first = autocast::to_lower_precision(w);
  {
    NoGradGuard no_grad;
    w.mul_(2.0);
  }
  const Tensor second = autocast::to_lower_precision(w);
  EXPECT_FALSE(second.is_same(first));
  EXPECT_EQ(second.to(DType::f32).to_vector<float>(), w.detach().to(DType::bf16).to(DType::f32).to_vector<float>());
}

TEST(Autocast, ParametersAndTheirGradientsStayF32) {
  Conv2d conv(2, 3, 3);
  Linear fc(3 * 4 * 4, 5);
  const Tensor x = randn({2, 2, 6, 6});
  Tensor loss;
  {
    const AutocastGuard region(DeviceType::CPU, DType::bf16);
    const Tensor y = fc(relu(conv(x)).reshape({2, 48}));
    EXPECT_EQ(y.dtype(), DType::bf16);
    loss = sum(y.to(DType::f32));
  }
  loss.backward();
  for (const Tensor& p : {conv.weight, conv.bias, fc.weight, fc.bias}) {
    EXPECT_EQ(p.dtype(), DType::f32);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), DType::f32);
  }
}

TEST(Autocast, TheBackwardPassKeepsTheForwardDtypesEvenInsideARegion) {
  Linear fc(4, 3);
  const AutocastGuard region(DeviceType::CPU, DType::bf16);
  const Tensor y = fc(randn({2, 4}));
  sum(y.to(DType::f32)).backward();
  EXPECT_EQ(fc.bias.grad().dtype(), DType::f32);
  EXPECT_EQ(fc.weight.grad().dtype(), DType::f32);
}

TEST(Autocast, OnlyBf16AndF16AreRegionDtypes) {
  expect_error([] { AutocastGuard region(DeviceType::CPU, DType::f64); }, "autocast: the dtype must be bf16 or f16, got f64");
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
}

TEST(Autocast, A16BitLinearMatchesF32WithinTheFormatsBound) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    const int64_t K = 300;
    const Tensor x = representable({17, K}, dtype, 1), w = representable({33, K}, dtype, 2);
    const Tensor b = representable({33}, dtype, 3);
    const Tensor y32 = linear(x, w, b);
    const Tensor y16 = linear(x.to(dtype), w.to(dtype), b.to(dtype));
    EXPECT_EQ(y16.dtype(), dtype);
    expect_within_bound(y16, y32, linear(magnitude(x), magnitude(w), magnitude(b)), K, dtype);
  }
}

TEST(Autocast, A16BitConvolutionMatchesF32WithinTheFormatsBound) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor x = representable({5, 7, 11, 11}, dtype, 4), w = representable({9, 7, 3, 3}, dtype, 5);
    const Tensor b = representable({9}, dtype, 6);
    const int64_t K = 7 * 3 * 3;
    for (int64_t padding : {0, 1}) {
      const Tensor y32 = conv2d(x, w, b, 1, padding);
      const Tensor y16 = conv2d(x.to(dtype), w.to(dtype), b.to(dtype), 1, padding);
      EXPECT_EQ(y16.dtype(), dtype);
      expect_within_bound(y16, y32, conv2d(magnitude(x), magnitude(w), magnitude(b), 1, padding), K, dtype);
    }
  }
}

TEST(Autocast, A16BitConvolutionsGradientsMatchF32WithinTheFormatsBound) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor x = representable({6, 3, 9, 9}, dtype, 7), w = representable({4, 3, 3, 3}, dtype, 8);
    const Tensor dy = representable({6, 4, 7, 7}, dtype, 9);
    Tensor grads32[2], grads16[2];
    for (int wide = 0; wide < 2; ++wide) {
      const Tensor xi = (wide ? x : x.to(dtype)).detach().requires_grad_();
      const Tensor wi = (wide ? w : w.to(dtype)).detach().requires_grad_();
      conv2d(xi, wi, Tensor(), 1, 0).backward(wide ? dy : dy.to(dtype));
      Tensor* out = wide ? grads32 : grads16;
      out[0] = xi.grad();
      out[1] = wi.grad();
    }
    EXPECT_EQ(grads16[0].dtype(), dtype);
    EXPECT_EQ(grads16[1].dtype(), dtype);
    // dx sums C_out * kH * kW products per pixel, dW sums N * H_out * W_out per weight.
    const Tensor ax = magnitude(x).detach().requires_grad_(), aw = magnitude(w).detach().requires_grad_();
    conv2d(ax, aw, Tensor(), 1, 0).backward(magnitude(dy));
    expect_within_bound(grads16[0], grads32[0], ax.grad(), 4 * 3 * 3, dtype);
    expect_within_bound(grads16[1], grads32[1], aw.grad(), 6 * 7 * 7, dtype);
  }
}

TEST(Autocast, F16OverflowsToInfinityAndUnderflowsToZeroWhereBf16DoesNot) {
  const Tensor big = full({2}, 300.0), tiny = full({2}, 1e-4);
  // 300 * 300 = 90000 > 65504, the largest f16: inf. bf16 has f32's range.
  EXPECT_TRUE(std::isinf(mul(big.to(DType::f16), big.to(DType::f16)).to(DType::f32).to_vector<float>()[0]));
  EXPECT_NEAR(mul(big.to(DType::bf16), big.to(DType::bf16)).to(DType::f32).to_vector<float>()[0], 90000.0, 90000.0 / 256);
  // 1e-4 * 1e-4 = 1e-8 < 2^-25, half the smallest f16 subnormal: 0. bf16 keeps it.
  EXPECT_EQ(mul(tiny.to(DType::f16), tiny.to(DType::f16)).to(DType::f32).to_vector<float>()[0], 0.0f);
  EXPECT_NEAR(mul(tiny.to(DType::bf16), tiny.to(DType::bf16)).to(DType::f32).to_vector<float>()[0], 1e-8, 1e-8 / 128);
}

}  // namespace
}  // namespace lockstep
