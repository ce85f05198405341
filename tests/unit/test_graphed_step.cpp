// The chapters' graphed training step (chapters/common/graphed_step.h) on a machine without a
// GPU: what it refuses. Its capture and replays are GPU tests (tests/gpu/test_graph.cpp).
#include <gtest/gtest.h>

#include "common/graphed_step.h"
#include "lockstep.h"
#include "test_util.h"

namespace lockstep::test {
namespace {

TEST(GraphedStep, NeedsAnEagerStepBeforeItsCapture) {
  expect_error([] { GraphedStep step([](const Tensor& x, const Tensor&) { return x; }, 0); },
               "at least one eager step must run before the capture, got 0");
}

TEST(GraphedStep, RefusesABatchOnTheCpu) {
  int steps_run = 0;
  GraphedStep step([&](const Tensor& x, const Tensor&) {
    ++steps_run;
    return x;
  });
  expect_error([&] { step(zeros({2, 3}), zeros({2}, TensorOptions().dtype(DType::i64))); },
               "--cuda-graph: a CUDA graph replays GPU work; the batch is on cpu");
  EXPECT_EQ(steps_run, 0);
  EXPECT_EQ(step.replays(), 0);
}

}  // namespace
}  // namespace lockstep::test
