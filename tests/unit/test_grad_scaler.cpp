// GradScaler against torch.amp.GradScaler's constants and rules: the defaults, scale, unscale_
// (divides, finds inf and NaN, any layout, f32 and f64, once per iteration), step (skips on
// inf/NaN, otherwise the same step as without scaling), update (backoff, growth after exactly
// growth_interval clean steps, update(new_scale)), the state dict and the disabled pass-through.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A parameter holding `values` whose gradient holds `grad`, both of `dtype`.
Tensor param_with_grad(const std::vector<double>& values, const std::vector<double>& grad, DType dtype = DType::f32) {
  const Shape shape{static_cast<int64_t>(values.size())};
  const Tensor p = from_vector(values, shape, TensorOptions().dtype(dtype)).requires_grad_(true);
  p.set_grad(from_vector(grad, shape, TensorOptions().dtype(dtype)));
  return p;
}

// Whether two CPU tensors hold the same bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.contiguous().data(), b.contiguous().data(), a.nbytes()) == 0;
}

// One iteration with finite gradients: a fresh gradient of 1 for `p`, then step and update.
void clean_step(GradScaler& scaler, SGD& sgd, const Tensor& p) {
  p.set_grad(ones(p.shape()));
  scaler.step(sgd);
  scaler.update();
}

// One iteration whose gradient holds an inf.
void overflowing_step(GradScaler& scaler, SGD& sgd, const Tensor& p) {
  p.set_grad(full(p.shape(), kInf));
  scaler.step(sgd);
  scaler.update();
}

// The value of `key` in `state`.
double state_entry(const StateDict& state, const std::string& key) {
  for (const auto& [name, tensor] : state) {
    if (name == key) return tensor.item();
  }
  ADD_FAILURE() << "no entry " << key;
  return kNaN;
}

TEST(GradScaler, HasPyTorchsDefaults) {
  const GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.5);
  EXPECT_EQ(scaler.get_growth_interval(), 2000);
  EXPECT_TRUE(scaler.is_enabled());
}

TEST(GradScaler, TakesItsOptionsFromTheBuilder) {
  const GradScaler scaler(
      GradScalerOptions().init_scale(1024).growth_factor(4).backoff_factor(0.25).growth_interval(7).enabled(true));
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.get_growth_factor(), 4.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.25);
  EXPECT_EQ(scaler.get_growth_interval(), 7);
}

TEST(GradScaler, RefusesOptionsThatCannotWork) {
  expect_error([] { GradScaler(GradScalerOptions().growth_factor(1.0)); }, "growth_factor > 1");
  expect_error([] { GradScaler(GradScalerOptions().backoff_factor(1.0)); }, "backoff_factor in (0, 1)");
  expect_error([] { GradScaler(GradScalerOptions().growth_interval(0)); }, "growth_interval >= 1");
  expect_error([] { GradScaler(GradScalerOptions().init_scale(0)); }, "init_scale > 0");
}

TEST(GradScaler, ScaleMultipliesTheLossAndSoTheGradients) {
  const GradScaler scaler(GradScalerOptions().init_scale(1024));
  const Tensor w = from_vector(std::vector<double>{2.0, -1.0}, {2}).requires_grad_(true);
  const Tensor loss = sum(w * 3.0);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.item(), 3.0 * 1024);
  scaled.backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3.0f * 1024, 3.0f * 1024}));
}

TEST(GradScaler, UnscaleDividesTheGradientsInPlace) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Tensor p = param_with_grad({1.0, 2.0, 3.0}, {0.25 * 1024, -3.0 * 1024, 1024}, dtype);
    const Tensor grad = p.grad();
    const int64_t version = grad.version();
    SGD sgd({p}, SGDOptions(0.1));
    GradScaler scaler(GradScalerOptions().init_scale(1024));
    scaler.unscale_(sgd);
    EXPECT_TRUE(p.grad().is_same(grad)) << dtype_name(dtype);
    EXPECT_EQ(grad.to_vector<double>(), (std::vector<double>{0.25, -3.0, 1.0})) << dtype_name(dtype);
    EXPECT_GT(grad.version(), version) << "the in-place write counts in the version";
  }
}

TEST(GradScaler, UnscaleWalksGradientsOfAnyLayout) {
  // A transposed view: the kernel must find the elements by their strides.
  const Tensor p = zeros({2, 3}).requires_grad_(true);
  const Tensor storage = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}) * 8.0;
  p.set_grad(storage.t());
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(8));
  scaler.unscale_(sgd);
  EXPECT_FALSE(p.grad().is_contiguous());
  EXPECT_EQ(p.grad().contiguous().to_vector<float>(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

TEST(GradScaler, UnscaleFindsInfAndNaNAnywhereAndStepSkips) {
  // Large enough to be split over threads, with the bad value in the last element.
  const int64_t n = 100003;
  for (const double bad : {kInf, -kInf, kNaN}) {
    std::vector<double> values(n, 1.0), grad(n, 2.0);
    grad[n - 1] = bad;
    const Tensor clean = param_with_grad({1.0}, {1.0});
    const Tensor p = param_with_grad(values, grad);
    SGD sgd({clean, p}, SGDOptions(0.1));
    GradScaler scaler;
    scaler.unscale_(sgd);
    EXPECT_FALSE(scaler.step(sgd)) << "gradient with " << bad;
  }
}

TEST(GradScaler, StepSkipsOnInfAndLeavesParametersBitwiseUnchanged) {
  const Tensor a = param_with_grad({0.1, -0.7, 3.3}, {1.0, 2.0, 3.0});
  const Tensor b = param_with_grad({1.7, 2.9}, {kInf, 1.0});
  const Tensor a_before = a.detach().clone(), b_before = b.detach().clone();
  SGD sgd({a, b}, SGDOptions(0.1).momentum(0.9));
  GradScaler scaler;
  EXPECT_FALSE(scaler.step(sgd));
  EXPECT_TRUE(same_bits(a, a_before));
  EXPECT_TRUE(same_bits(b, b_before));
  EXPECT_FALSE(sgd.has_state(0, "momentum_buffer")) << "a skipped step creates no optimiser state";
}

TEST(GradScaler, StepsExactlyAsWithoutScalingWhenTheGradientsAreFinite) {
  // With a power-of-two scale, scaling and unscaling are exact: the same bits as plain SGD.
  const std::vector<double> values{0.1, -0.7, 3.3}, grad{0.013, -2.5, 0.3333};
  const Tensor plain = param_with_grad(values, grad);
  const Tensor scaled = param_with_grad(values, grad);
  scaled.grad().mul_(65536.0);
  SGD plain_sgd({plain}, SGDOptions(0.1).momentum(0.9));
  SGD scaled_sgd({scaled}, SGDOptions(0.1).momentum(0.9));
  GradScaler scaler;
  plain_sgd.step();
  EXPECT_TRUE(scaler.step(scaled_sgd));
  EXPECT_FALSE(same_bits(plain, from_vector(values, {3}))) << "the step moved the parameter";
  EXPECT_TRUE(same_bits(plain, scaled));
}

TEST(GradScaler, StepWithoutUnscaleUnscalesItself) {
  const Tensor p = param_with_grad({1.0, 1.0}, {2.0 * 1024, 4.0 * 1024});
  SGD sgd({p}, SGDOptions(0.5));
  GradScaler scaler(GradScalerOptions().init_scale(1024));
  EXPECT_TRUE(scaler.step(sgd));
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{2.0f, 4.0f}));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.0f, -1.0f}));
}

TEST(GradScaler, UpdateBacksOffOnInfAndRestartsTheCount) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(1024).growth_interval(3));
  clean_step(scaler, sgd, p);
  clean_step(scaler, sgd, p);
  EXPECT_EQ(state_entry(scaler.state_dict(), "_growth_tracker"), 2);
  overflowing_step(scaler, sgd, p);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(state_entry(scaler.state_dict(), "_growth_tracker"), 0);
  // The count starts again: two clean steps do not grow the scale, the third does.
  clean_step(scaler, sgd, p);
  clean_step(scaler, sgd, p);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  clean_step(scaler, sgd, p);
  EXPECT_EQ(scaler.get_scale(), 1024.0);
}

TEST(GradScaler, GrowsAfterExactlyGrowthIntervalCleanSteps) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().growth_interval(3));
  const std::vector<double> expected{65536, 65536, 131072, 131072, 131072, 262144};
  for (const double scale : expected) {
    clean_step(scaler, sgd, p);
    EXPECT_EQ(scaler.get_scale(), scale);
  }
  EXPECT_EQ(state_entry(scaler.state_dict(), "_growth_tracker"), 0);
}

TEST(GradScaler, DoesNotGrowToInfinity) {
  // 2^127 is the largest power of two a float holds: doubling it would give inf.
  const double largest = std::ldexp(1.0, 127);
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(largest).growth_interval(1));
  clean_step(scaler, sgd, p);
  EXPECT_EQ(scaler.get_scale(), largest);
  EXPECT_EQ(state_entry(scaler.state_dict(), "_growth_tracker"), 0);
}

TEST(GradScaler, UpdateWithANewScaleSetsItAndKeepsTheCount) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().growth_interval(3));
  clean_step(scaler, sgd, p);
  p.set_grad(ones({1}));
  scaler.step(sgd);
  scaler.update(1024.0);
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(state_entry(scaler.state_dict(), "_growth_tracker"), 1);
  // A new iteration may start: unscale_ is allowed again.
  p.set_grad(ones({1}));
  scaler.unscale_(sgd);
}

TEST(GradScaler, UnscaleTwiceIsAnError) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler;
  scaler.unscale_(sgd);
  const std::vector<float> once = p.grad().to_vector<float>();
  expect_error([&] { scaler.unscale_(sgd); },
               "GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update()");
  EXPECT_EQ(p.grad().to_vector<float>(), once) << "the refused call divided the gradients again";
}

TEST(GradScaler, UnscaleAfterStepAndStepTwiceAreErrors) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler;
  scaler.step(sgd);
  expect_error([&] { scaler.unscale_(sgd); }, "unscale_() is being called after step() on this optimizer");
  expect_error([&] { scaler.step(sgd); }, "step() has already been called on this optimizer since the last update()");
}

TEST(GradScaler, StepWithoutGradientsAndUpdateWithoutStepAreErrors) {
  const Tensor p = from_vector(std::vector<double>{1.0}, {1}).requires_grad_(true);
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler;
  expect_error([&] { scaler.update(); }, "no inf checks were recorded prior to update()");
  expect_error([&] { scaler.step(sgd); }, "none of its parameters has a gradient");
  expect_error([&] { scaler.update(); }, "no inf checks were recorded prior to update()");
}

TEST(GradScaler, StepWithANonFiniteScaleIsAnError) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler scaler;
  p.set_grad(full({1}, 65536.0));  // 1 once unscaled
  scaler.step(sgd);
  scaler.update(kInf);
  p.set_grad(ones({1}));
  expect_error([&] { scaler.step(sgd); },
               "GradScaler.step: the loss scale is inf; unscaling the gradients needs a finite scale");
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>{0.9f}) << "only the first step ran";
}

TEST(GradScaler, RefusesA16BitGradientAndTouchesNone) {
  const Tensor a = param_with_grad({1.0}, {4.0});
  const Tensor b = zeros({1}).requires_grad_(true);
  b.set_grad(ones({1}).to(DType::f16));
  SGD sgd({a, b}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(4));
  expect_error([&] { scaler.unscale_(sgd); }, "GradScaler.unscale_: cannot unscale f16 gradients; keep the parameters in f32");
  EXPECT_EQ(a.grad().item(), 4.0);
}

TEST(GradScaler, StateDictHasPyTorchsKeysAndRoundTrips) {
  const Tensor p = param_with_grad({1.0}, {1.0});
  SGD sgd({p}, SGDOptions(0.1));
  GradScaler saved(GradScalerOptions().init_scale(256).growth_factor(4).backoff_factor(0.25).growth_interval(5));
  overflowing_step(saved, sgd, p);
  clean_step(saved, sgd, p);
  clean_step(saved, sgd, p);
  const StateDict state = saved.state_dict();
  std::vector<std::string> keys;
  for (const auto& entry : state) keys.push_back(entry.first);
  EXPECT_EQ(keys, (std::vector<std::string>{"scale", "growth_factor", "backoff_factor", "growth_interval",
                                             "_growth_tracker"}));
  EXPECT_EQ(state_entry(state, "scale"), 64.0);

  GradScaler loaded;
  loaded.load_state_dict(state);
  EXPECT_EQ(loaded.get_scale(), 64.0);
  EXPECT_EQ(loaded.get_growth_factor(), 4.0);
  EXPECT_EQ(loaded.get_backoff_factor(), 0.25);
  EXPECT_EQ(loaded.get_growth_interval(), 5);
  EXPECT_EQ(state_entry(loaded.state_dict(), "_growth_tracker"), 2);
  // Both go on alike: three more clean steps make five in a row, and the scale grows.
  for (GradScaler* scaler : {&saved, &loaded}) {
    for (int i = 0; i < 3; ++i) clean_step(*scaler, sgd, p);
    EXPECT_EQ(scaler->get_scale(), 256.0);
  }
}

TEST(GradScaler, LoadingAStateWithAMissingKeyIsAnErrorAndChangesNothing) {
  StateDict state = GradScaler(GradScalerOptions().init_scale(8)).state_dict();
  state.pop_back();  // _growth_tracker
  GradScaler scaler;
  expect_error([&] { scaler.load_state_dict(state); },
               "GradScaler.load_state_dict: the state dict has no \"_growth_tracker\" entry");
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  expect_error([&] { scaler.load_state_dict({}); }, "the state dict is empty");
}

TEST(GradScaler, LoadingSettingsTheConstructorRefusesIsAnErrorAndChangesNothing) {
  StateDict state = GradScaler(GradScalerOptions().init_scale(8)).state_dict();
  for (auto& entry : state) {
    if (entry.first == "growth_interval") entry.second.fill_(0);
  }
  GradScaler scaler;
  expect_error([&] { scaler.load_state_dict(state); },
               "GradScaler.load_state_dict: expected a growth_interval >= 1, got 0");
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

TEST(GradScaler, DisabledPassesEverythingThrough) {
  GradScaler scaler(GradScalerOptions().enabled(false));
  EXPECT_FALSE(scaler.is_enabled());
  EXPECT_EQ(scaler.get_scale(), 1.0);
  const Tensor loss = from_vector(std::vector<double>{2.5}, {1});
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));

  const Tensor p = param_with_grad({1.0, 1.0}, {2.0, 4.0});
  SGD sgd({p}, SGDOptions(0.5));
  scaler.unscale_(sgd);
  scaler.unscale_(sgd);
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{2.0f, 4.0f})) << "disabled, unscale_ changes nothing";
  EXPECT_TRUE(scaler.step(sgd));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.0f, -1.0f}));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());
}

}  // namespace
