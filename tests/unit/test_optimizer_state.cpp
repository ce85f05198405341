// Optimizer::state_dict / load_state_dict: PyTorch's layout, a round trip that continues
// training bit for bit, and a clear sentence for every state that does not fit.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "lockstep.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace lockstep {
namespace {

using test::expect_error;

// Two parameters (a matrix and a vector) with fixed values, and a step of made-up gradients.
std::vector<Tensor> make_params(uint64_t seed) {
  Generator g(seed);
  return {randn({3, 4}, {}, &g).requires_grad_(), randn({4}, {}, &g).requires_grad_()};
}

void fake_step(Optimizer& opt, int step) {
  Generator g(1000 + step);
  for (const Tensor& p : opt.params()) p.set_grad(randn(p.shape(), {}, &g));
  opt.step();
}

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

// The same optimiser class, hyper-parameters and parameter values.
template <class Opt, class Options>
void expect_resume_is_bit_exact(const Options& options, const Options& other_options) {
  // K + M steps in one go.
  std::vector<Tensor> straight = make_params(1);
  Opt reference(straight, options);
  for (int s = 0; s < 5; ++s) fake_step(reference, s);

  // K steps, state_dict, a fresh optimiser with other settings, load, M steps.
  std::vector<Tensor> first = make_params(1);
  Opt before(first, options);
  for (int s = 0; s < 3; ++s) fake_step(before, s);
  const OptimizerStateDict saved = before.state_dict();
  std::vector<Tensor> resumed = make_params(2);
  for (size_t i = 0; i < resumed.size(); ++i) {
    NoGradGuard no_grad;
    resumed[i].copy_(first[i]);
  }
  Opt after(resumed, other_options);
  after.load_state_dict(saved);
  for (int s = 3; s < 5; ++s) fake_step(after, s);

  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(values(straight[i]), values(resumed[i])) << "parameter " << i;
  const OptimizerStateDict a = reference.state_dict(), b = after.state_dict();
  ASSERT_EQ(a.state.size(), b.state.size());
  for (size_t i = 0; i < a.state.size(); ++i) {
    EXPECT_EQ(a.state[i].first, b.state[i].first);
    EXPECT_EQ(values(a.state[i].second), values(b.state[i].second)) << a.state[i].first;
  }
  EXPECT_EQ(a.param_group, b.param_group);
}

TEST(OptimizerState, SgdHasPyTorchsLayout) {
  SGD opt(make_params(1), SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(1e-4));
  OptimizerStateDict before = opt.state_dict();
  EXPECT_EQ(before.optimizer, "SGD");
  EXPECT_EQ(before.num_params, 2);
  EXPECT_TRUE(before.state.empty()) << "no momentum buffer before the first step, as in PyTorch";
  fake_step(opt, 0);
  const OptimizerStateDict s = opt.state_dict();
  ASSERT_EQ(s.state.size(), 2u);
  EXPECT_EQ(s.state[0].first, "state.0.momentum_buffer");
  EXPECT_EQ(s.state[1].first, "state.1.momentum_buffer");
  EXPECT_EQ(s.state[0].second.shape(), (Shape{3, 4}));
  EXPECT_EQ(std::get<double>(s.param_group.at("lr")), 0.1);
  EXPECT_EQ(std::get<double>(s.param_group.at("momentum")), 0.9);
  EXPECT_EQ(std::get<double>(s.param_group.at("dampening")), 0.1);
  EXPECT_EQ(std::get<double>(s.param_group.at("weight_decay")), 1e-4);
  EXPECT_EQ(std::get<bool>(s.param_group.at("nesterov")), false);
}

TEST(OptimizerState, AdamHasPyTorchsLayout) {
  Adam opt(make_params(1), AdamOptions(1e-3).betas(0.8, 0.99).eps(1e-6).weight_decay(0.01));
  fake_step(opt, 0);
  fake_step(opt, 1);
  const OptimizerStateDict s = opt.state_dict();
  EXPECT_EQ(s.optimizer, "Adam");
  ASSERT_EQ(s.state.size(), 6u);
  EXPECT_EQ(s.state[0].first, "state.0.step");
  EXPECT_EQ(s.state[1].first, "state.0.exp_avg");
  EXPECT_EQ(s.state[2].first, "state.0.exp_avg_sq");
  EXPECT_EQ(s.state[0].second.dim(), 0);
  EXPECT_EQ(s.state[0].second.item(), 2.0);
  EXPECT_EQ(std::get<std::vector<double>>(s.param_group.at("betas")), (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(std::get<double>(s.param_group.at("eps")), 1e-6);
  EXPECT_EQ(std::get<bool>(s.param_group.at("amsgrad")), false);
}

TEST(OptimizerState, SgdResumesBitExactlyAndTakesTheSavedHyperParameters) {
  expect_resume_is_bit_exact<SGD>(SGDOptions(0.05).momentum(0.9).weight_decay(1e-3).nesterov(true),
                                  SGDOptions(0.5).momentum(0.1));
}

TEST(OptimizerState, AdamResumesBitExactly) {
  expect_resume_is_bit_exact<Adam>(AdamOptions(1e-2).betas(0.85, 0.995).weight_decay(1e-3), AdamOptions(0.3));
}

TEST(OptimizerState, AdamWResumesBitExactly) {
  expect_resume_is_bit_exact<AdamW>(AdamOptions(1e-2), AdamOptions(1e-4).weight_decay(0.5));
}

TEST(OptimizerState, LoadCopiesTheStateInsteadOfSharingIt) {
  SGD a(make_params(1), SGDOptions(0.1).momentum(0.9));
  fake_step(a, 0);
  const OptimizerStateDict saved = a.state_dict();
  SGD b(make_params(1), SGDOptions(0.1).momentum(0.9));
  b.load_state_dict(saved);
  EXPECT_FALSE(b.state(0, "momentum_buffer").is_same(a.state(0, "momentum_buffer")));
  EXPECT_NE(b.state(0, "momentum_buffer").data(), a.state(0, "momentum_buffer").data());
}

TEST(OptimizerState, AnotherOptimiserIsNamed) {
  Adam adam(make_params(1));
  fake_step(adam, 0);
  SGD sgd(make_params(1), SGDOptions(0.1));
  expect_error([&] { sgd.load_state_dict(adam.state_dict()); },
               "load_state_dict: the checkpoint's optimizer is Adam, this one is SGD");
  AdamW adamw(make_params(1));
  expect_error([&] { adamw.load_state_dict(adam.state_dict()); },
               "the checkpoint's optimizer is Adam, this one is AdamW");
}

TEST(OptimizerState, ADifferentNumberOfParametersIsRefused) {
  SGD two(make_params(1), SGDOptions(0.1).momentum(0.9));
  fake_step(two, 0);
  SGD one({make_params(1)[0]}, SGDOptions(0.1).momentum(0.9));
  expect_error([&] { one.load_state_dict(two.state_dict()); }, "the state dict is for 2 parameters, this optimiser has 1");
}

TEST(OptimizerState, AShapeThatDiffersIsNamed) {
  SGD a(make_params(1), SGDOptions(0.1).momentum(0.9));
  fake_step(a, 0);
  Generator g(3);
  SGD b({randn({4, 3}, {}, &g).requires_grad_(), randn({4}, {}, &g).requires_grad_()}, SGDOptions(0.1));
  expect_error([&] { b.load_state_dict(a.state_dict()); },
               "'state.0.momentum_buffer' has shape [3, 4] but parameter 0 needs [4, 3]");
}

TEST(OptimizerState, MissingEntriesAreNamed) {
  Adam adam(make_params(1));
  fake_step(adam, 0);
  OptimizerStateDict s = adam.state_dict();
  s.state.erase(s.state.begin() + 2);  // state.0.exp_avg_sq
  Adam other(make_params(1));
  expect_error([&] { other.load_state_dict(s); }, "no 'state.0.exp_avg_sq'; Adam keeps all of step, exp_avg, exp_avg_sq");
  OptimizerStateDict no_lr = adam.state_dict();
  no_lr.param_group.erase("lr");
  expect_error([&] { other.load_state_dict(no_lr); }, "the param group has no number \"lr\"");
  OptimizerStateDict no_eps = adam.state_dict();
  no_eps.param_group.erase("eps");
  expect_error([&] { other.load_state_dict(no_eps); }, "the param group has no \"eps\"");
}

TEST(OptimizerState, StateOfAnotherKindIsRefused) {
  SGD sgd(make_params(1), SGDOptions(0.1).momentum(0.9));
  fake_step(sgd, 0);
  OptimizerStateDict s = sgd.state_dict();
  s.state.emplace_back("state.1.exp_avg", zeros({4}));
  SGD other(make_params(1), SGDOptions(0.1));
  expect_error([&] { other.load_state_dict(s); }, "'state.1.exp_avg' is state SGD does not keep (SGD keeps momentum_buffer)");
  OptimizerStateDict far = sgd.state_dict();
  far.state.emplace_back("state.7.momentum_buffer", zeros({4}));
  expect_error([&] { other.load_state_dict(far); }, "state for parameter 7, but this optimiser has only 2 parameters");
}

TEST(OptimizerState, AFailedLoadChangesNothing) {
  SGD a(make_params(1), SGDOptions(0.1).momentum(0.9));
  fake_step(a, 0);
  OptimizerStateDict s = a.state_dict();
  s.param_group["momentum"] = -1.0;  // invalid, found after the tensors would fit
  SGD b(make_params(1), SGDOptions(0.2).momentum(0.5));
  fake_step(b, 1);
  const std::vector<float> buffer = values(b.state(0, "momentum_buffer"));
  expect_error([&] { b.load_state_dict(s); }, "expected a momentum >= 0, got -1");
  EXPECT_EQ(b.lr(), 0.2);
  EXPECT_EQ(values(b.state(0, "momentum_buffer")), buffer);
}

TEST(OptimizerState, LoadingMovesStateToTheParametersDtype) {
  SGD a(make_params(1), SGDOptions(0.1).momentum(0.9));
  fake_step(a, 0);
  OptimizerStateDict s = a.state_dict();
  for (auto& entry : s.state) entry.second = entry.second.to(DType::f64);  // as if saved in f64
  SGD b(make_params(1), SGDOptions(0.1));
  b.load_state_dict(s);
  EXPECT_EQ(b.state(0, "momentum_buffer").dtype(), DType::f32);
  EXPECT_EQ(values(b.state(0, "momentum_buffer")), values(a.state(0, "momentum_buffer")));
}

}  // namespace
}  // namespace lockstep
