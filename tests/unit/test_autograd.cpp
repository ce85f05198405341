// The autograd engine: accumulation into leaves, shared subexpressions, retain_graph, no_grad,
// detach, and the post-accumulate-grad hooks DDP relies on.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

TEST(Autograd, ChainRuleOnASmallExpression) {
  Tensor x = from_vector({2.0}, {1}).requires_grad_();
  Tensor y = x * x * x + x * 3.0;  // dy/dx = 3x^2 + 3 = 15
  y.backward(ones({1}));
  EXPECT_DOUBLE_EQ(x.grad().item(), 15.0);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward");
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor w = from_vector({1.0, 2.0}, {2}).requires_grad_();
  sum(w * 3.0).backward();
  sum(w * 3.0).backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{6.0, 6.0}));
  w.set_grad(Tensor());  // zero_grad(set_to_none=True)
  sum(w).backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1.0, 1.0}));
}

TEST(Autograd, LeavesNeverShareAGradientBuffer) {
  // AddBackward hands the same gradient tensor to both inputs; each leaf must still get a
  // buffer of its own, or accumulating into one would change the other.
  Tensor a = ones({3}).requires_grad_(), b = ones({3}).requires_grad_();
  // (a + b) * 2: MulBackward makes a fresh contiguous gradient that AddBackward passes to both.
  sum((a + b) * 2.0).backward();
  sum((a + b) * 2.0).backward();
  EXPECT_NE(a.grad().storage(), b.grad().storage());
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{4, 4, 4}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{4, 4, 4}));
}

TEST(Autograd, SharedSubexpressionSumsBothPaths) {
  Tensor x = from_vector({3.0}, {1}, TensorOptions().dtype(DType::f64)).requires_grad_();
  Tensor h = exp(x);
  Tensor y = h * h + h;  // dy/dx = (2h + 1) * h
  y.backward(ones_like(y));
  const double h0 = std::exp(3.0);
  EXPECT_NEAR(x.grad().item(), (2 * h0 + 1) * h0, 1e-9 * h0 * h0);
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = sum(x * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4.0f, 4.0f}));
  // A third backward through the freed graph must fail.
  expect_error([&] { y.backward(); }, "retain_graph=true");
}

TEST(Autograd, NoGradAndDetachRecordNothing) {
  Tensor w = ones({3}).requires_grad_();
  {
    NoGradGuard guard;
    Tensor y = w * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE((w * 2.0).requires_grad());
  Tensor d = (w * 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  // Inputs that do not require grad get no gradient; only w does.
  Tensor x = ones({3});
  sum(w * x).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor w = ones({3}).requires_grad_();
  Tensor y = w * 2.0;
  EXPECT_THROW(y.backward(), Error);
  y.backward(from_vector({1.0, 0.0, -1.0}, {3}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2.0f, 0.0f, -2.0f}));
  EXPECT_THROW(sum(ones({2})).backward(), Error);  // nothing requires grad
}

TEST(Autograd, PostAccumulateHookFiresOnceWithTheCompleteGradient) {
  Tensor w = from_vector({1.0, 2.0}, {2}).requires_grad_();
  int calls = 0;
  std::vector<float> seen;
  const HookHandle handle = w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    seen = leaf.grad().to_vector<float>();
  });
  // w is used on three paths; the hook must see the sum of all three, once.
  Tensor y = sum(w * 2.0) + sum(w * w) + sum(w);
  y.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{5.0f, 7.0f}));  // 2 + 2w + 1
  w.remove_hook(handle);
  sum(w).backward();
  EXPECT_EQ(calls, 1);
}

TEST(Autograd, LeavesFinishInReverseOrderOfUse) {
  // Like a network: layer 1 uses w1, layer 2 uses w2. Backward completes w2 before w1, which is
  // what lets DDP start communicating the last layer's gradients early.
  Tensor w1 = ones({2}).requires_grad_(), w2 = ones({2}).requires_grad_();
  std::vector<std::string> order;
  w1.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w1"); });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w2"); });
  Tensor h = relu(from_vector({1.0, 2.0}, {2}) * w1);
  sum(tanh(h * w2)).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w2", "w1"}));
}

TEST(Autograd, ALeafIsAccumulatedAsSoonAsItsGradientIsComplete) {
  // w2's gradient is complete once the last layer's backward has run; its hook (where DDP starts
  // an all-reduce) must fire then, before the first layer's backward.
  Tensor w1 = ones({2}).requires_grad_(), w2 = ones({2}).requires_grad_();
  std::vector<std::string> order;
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w2 accumulated"); });
  auto forward = [&] {
    const Tensor h = from_vector({1.0, 2.0}, {2}) * w1;
    Tensor marked;
    {
      NoGradGuard no_grad;
      marked = h.clone();
    }
    // An op of the first layer that says when its backward runs.
    marked = record(marked, "LayerOneBackward", {h}, [&](const Tensor& g) {
      order.push_back("layer 1 backward");
      return std::vector<Tensor>{g};
    });
    return sum(marked * w2);
  };
  // As in a training loop, whose `loss` holds the last step's graph while the next forward runs:
  // both graphs share each leaf's AccumulateGrad, made by the first, older than the second's nodes.
  const Tensor previous = forward();
  const Tensor loss = forward();
  loss.backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w2 accumulated", "layer 1 backward"}));
}

TEST(Autograd, ViewsAreDifferentiable) {
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].t().reshape({6}) * 2.0; }, {random_input({2, 3}, 1)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].slice(1, 1, 4, 2); }, {random_input({3, 5}, 2)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].select(0, 1); }, {random_input({3, 2}, 3)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].permute({2, 0, 1}).contiguous(); },
                        {random_input({2, 3, 4}, 4)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].expand({4, 3}); }, {random_input({1, 3}, 5)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].unsqueeze(0).squeeze(0).flatten(); },
                        {random_input({2, 2}, 6)}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return x[0].to(DType::f32).to(DType::f64); },
                        {random_input({3}, 7)}, 1e-3, 1e-4, 1e-3));
}

TEST(Autograd, TheCallersGradientIsNeverReusedAsALeafGradient) {
  // backward(g) through an op that passes g on unchanged: the leaf must get its own buffer, or
  // zeroing (or accumulating into) x.grad would change the caller's g.
  Tensor x = ones({3}).requires_grad_();
  const Tensor g = from_vector({1, 2, 3}, {3});
  (x + 0.0).backward(g);
  (x + 0.0).backward(g);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  x.grad().zero_();
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Autograd, InPlaceChangesToRecordedTensorsAreRefused) {
  // Lockstep records no in-place ops, so while recording, a tensor in the graph is read-only.
  Tensor x = ones({1}).requires_grad_();
  Tensor z = x * 2.0;
  expect_error([&] { z.mul_(10.0); }, "mul_: a tensor that requires grad cannot be modified in place");
  expect_error([&] { x.view({1}).fill_(7.0); }, "fill_: a tensor that requires grad cannot be modified in place");
  NoGradGuard no_grad;
  z.mul_(10.0);  // allowed when nothing is recorded (how optimisers update weights)
}

TEST(Autograd, VersionCountsInPlaceChangesSharedByViewsAndDetach) {
  Tensor x = zeros({2, 3});
  EXPECT_EQ(x.version(), 0);  // a new tensor starts at 0, as in PyTorch
  x.fill_(1.0);
  EXPECT_EQ(x.version(), 1);
  const Tensor row = x.select(0, 1), alias = x.detach();
  row.mul_(2.0);
  alias.add_(ones({2, 3}));
  alias.copy_(zeros({3}));
  EXPECT_EQ(x.version(), 4);
  EXPECT_EQ(row.version(), 4);
  // A result has data of its own, and so a version of its own.
  EXPECT_EQ(x.clone().version(), 0);
  EXPECT_EQ((x + 1.0).version(), 0);
  EXPECT_EQ(zeros_like(x).version(), 0);
  EXPECT_EQ(x.version(), 4);
}

TEST(Autograd, BackwardRefusesASavedInputChangedInPlace) {
  // The common case: a batch refilled in place before the backward pass of the last one.
  Tensor w = ones({3}).requires_grad_();
  Tensor x = from_vector({1.0, 2.0, 3.0}, {3});
  Tensor loss = sum(w * x);  // MulBackward saves x: it is w's gradient
  x.fill_(0.0);
  const std::string message = error_message([&] { loss.backward(); });
  EXPECT_EQ(message, "MulBackward: a tensor it saved in the forward pass (f32, shape [3]) was modified in place "
                     "after it was saved: it is at version 1, expected version 0, so the gradient would be computed "
                     "from the wrong values. Make the in-place change after backward(), or change a clone() instead");
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, BackwardRefusesChangesThroughDetachAndAViewOfTheTarget) {
  // exp saves its own output; detach() shares the data and its version.
  Tensor a = from_vector({0.0, 1.0}, {2}).requires_grad_();
  Tensor e = exp(a);
  Tensor loss = sum(e);
  e.detach().mul_(2.0);
  expect_error([&] { loss.backward(); }, "ExpBackward: a tensor it saved in the forward pass (f32, shape [2])");
  // cross_entropy saves the caller's class labels.
  Tensor logits = zeros({2, 3}).requires_grad_();
  Tensor target = from_vector(std::vector<int64_t>{0, 2}, {2});
  Tensor ce = cross_entropy(logits, target);
  target.slice(0, 1, 2).fill_(1.0);
  expect_error([&] { ce.backward(); }, "CrossEntropyBackward: a tensor it saved in the forward pass (i64, shape [2])");
  // max along a dimension returns the indices its backward pass uses.
  Tensor m = from_vector({1.0, 5.0, 7.0, 2.0}, {2, 2}).requires_grad_();
  auto [values, indices] = max(m, 1);
  indices.fill_(0.0);
  // (C++17 lambdas cannot capture a structured binding; GCC allows it, Clang does not.)
  expect_error([&values = values] { sum(values).backward(); },
               "MaxBackward: a tensor it saved in the forward pass (i64, shape [2])");
}

TEST(Autograd, AnOptimiserStepBeforeASecondBackwardIsCaught) {
  // The step changes w, which MulBackward saved (w * w needs w for its gradient), so
  // backward through the retained graph would use the new w with the old graph.
  Tensor w = from_vector({1.0, 2.0}, {2}).requires_grad_();
  Tensor loss = sum(w * w);
  loss.backward(Tensor(), /*retain_graph=*/true);
  SGD optimizer({w}, SGDOptions(0.1));
  const int64_t before = w.version();
  optimizer.step();
  EXPECT_EQ(w.version(), before + 1);
  expect_error([&] { loss.backward(); }, "MulBackward: a tensor it saved in the forward pass (f32, shape [2]) was "
                                         "modified in place after it was saved: it is at version 1, expected version 0");
}

TEST(Autograd, ChangingWhatNoBackwardNeedsIsAllowed) {
  // AddBackward saves nothing; MulBackward saves w only when x needs a gradient (it does not).
  Tensor w = ones({2}).requires_grad_();
  Tensor x = full({2}, 3.0);
  Tensor loss = sum(w * x) + sum(x + w);
  {
    NoGradGuard no_grad;
    w.add_(ones({2}));
  }
  loss.backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{4, 4}));
}

TEST(Autograd, BackwardChecksTheGradientsDtype) {
  Tensor x = ones({2}).requires_grad_();
  expect_error([&] { (x * 2.0).backward(ones({2}, TensorOptions().dtype(DType::f64))); },
               "backward: gradient is f64 but the tensor is f32");
}

TEST(Autograd, AHookMayRemoveItself) {
  Tensor w = ones({2}).requires_grad_();
  int calls = 0;
  HookHandle handle = 0;
  handle = w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    leaf.remove_hook(handle);
  });
  sum(w).backward();
  sum(w).backward();
  EXPECT_EQ(calls, 1);
}
