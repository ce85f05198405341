// Learning-rate schedulers (optim/lr_scheduler.h): LinearLR gives PyTorch's learning rates,
// its state_dict round-trips into a scheduler that continues exactly, a checkpoint carries it,
// and bad settings or a state of another scheduler are clear sentences.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "lockstep.h"
#include "nn/linear.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "temp_dir.h"
#include "test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

// One parameter: the schedulers only read and set the optimiser's learning rate.
struct Optimised {
  explicit Optimised(double lr) : param(zeros({1}).requires_grad_()), sgd({param}, SGDOptions(lr)) {}
  Tensor param;
  SGD sgd;
};

// One case of tests/reference/linear_lr_torch.py: the settings and, for t = 0, 1, ..., the
// learning rates PyTorch prints (chained: what torch trains with; closed: its closed form).
struct TorchCase {
  double lr, start_factor, end_factor;
  int64_t total_iters;
  std::vector<double> chained, closed;
};

// The output of `/usr/bin/python3 tests/reference/linear_lr_torch.py` with torch 1.13.0a0
// (Debian's python3-torch), copied digit for digit:
//
//   case defaults: lr=0.05 start_factor=0.3333333333333333 end_factor=1.0 total_iters=5
//     t=0 chained=0.016666666666666666 closed=0.016666666666666666
//     t=1 chained=0.023333333333333334 closed=0.023333333333333334
//     t=2 chained=0.030000000000000002 closed=0.030000000000000006
//     t=3 chained=0.036666666666666674 closed=0.036666666666666674
//     t=4 chained=0.04333333333333334 closed=0.043333333333333335
//     t=5 chained=0.05 closed=0.05
//     t=6 chained=0.05 closed=0.05
//     t=7 chained=0.05 closed=0.05
//   case goyal: lr=0.4 start_factor=0.125 end_factor=1.0 total_iters=10
//     t=0 chained=0.05 closed=0.05
//     t=1 chained=0.085 closed=0.085
//     t=2 chained=0.12 closed=0.12
//     t=3 chained=0.155 closed=0.15500000000000003
//     t=4 chained=0.19 closed=0.19
//     t=5 chained=0.22499999999999998 closed=0.225
//     t=6 chained=0.25999999999999995 closed=0.26
//     t=7 chained=0.29499999999999993 closed=0.29500000000000004
//     t=8 chained=0.3299999999999999 closed=0.33
//     t=9 chained=0.3649999999999999 closed=0.365
//     t=10 chained=0.39999999999999986 closed=0.4
//     t=11 chained=0.39999999999999986 closed=0.4
//     t=12 chained=0.39999999999999986 closed=0.4
//   case decay: lr=0.1 start_factor=1.0 end_factor=0.1 total_iters=4
//     t=0 chained=0.1 closed=0.1
//     t=1 chained=0.07750000000000001 closed=0.07750000000000001
//     t=2 chained=0.055000000000000014 closed=0.05500000000000001
//     t=3 chained=0.03250000000000001 closed=0.032499999999999994
//     t=4 chained=0.01 closed=0.009999999999999998
//     t=5 chained=0.01 closed=0.009999999999999998
//     t=6 chained=0.01 closed=0.009999999999999998
//   state_dict after 3 steps: last_epoch=3, base_lrs=[0.4], start_factor=0.125, end_factor=1.0, total_iters=10
const std::vector<TorchCase>& torch_cases() {
  static const std::vector<TorchCase> cases = {
      {0.05, 1.0 / 3, 1.0, 5,
       {0.016666666666666666, 0.023333333333333334, 0.030000000000000002, 0.036666666666666674, 0.04333333333333334,
        0.05, 0.05, 0.05},
       {0.016666666666666666, 0.023333333333333334, 0.030000000000000006, 0.036666666666666674,
        0.043333333333333335, 0.05, 0.05, 0.05}},
      {0.4, 0.125, 1.0, 10,
       {0.05, 0.085, 0.12, 0.155, 0.19, 0.22499999999999998, 0.25999999999999995, 0.29499999999999993,
        0.3299999999999999, 0.3649999999999999, 0.39999999999999986, 0.39999999999999986, 0.39999999999999986},
       {0.05, 0.085, 0.12, 0.15500000000000003, 0.19, 0.225, 0.26, 0.29500000000000004, 0.33, 0.365, 0.4, 0.4,
        0.4}},
      {0.1, 1.0, 0.1, 4,
       {0.1, 0.07750000000000001, 0.055000000000000014, 0.03250000000000001, 0.01, 0.01, 0.01},
       {0.1, 0.07750000000000001, 0.05500000000000001, 0.032499999999999994, 0.009999999999999998,
        0.009999999999999998, 0.009999999999999998}},
  };
  return cases;
}

TEST(LinearLR, GivesPyTorchsClosedFormBitForBitAndItsChainedRatesToTheLastBits) {
  for (const TorchCase& c : torch_cases()) {
    Optimised o(c.lr);
    LinearLR scheduler(o.sgd, c.start_factor, c.end_factor, c.total_iters);
    for (size_t t = 0; t < c.closed.size(); ++t) {
      if (t > 0) scheduler.step();
      EXPECT_EQ(scheduler.get_last_lr(), c.closed[t]) << "lr " << c.lr << ", t=" << t;
      EXPECT_EQ(o.sgd.lr(), c.closed[t]) << "the optimiser trains with the scheduler's rate";
      EXPECT_NEAR(scheduler.get_last_lr(), c.chained[t], 4 * std::numeric_limits<double>::epsilon() * c.lr)
          << "lr " << c.lr << ", t=" << t;
      EXPECT_EQ(scheduler.last_epoch(), static_cast<int64_t>(t));
    }
  }
}

TEST(LinearLR, ConstructionSetsTheFirstRateAndKeepsTheOptimisersAsBase) {
  Optimised o(0.4);
  const LinearLR warmup(o.sgd, 0.125, 1.0, 938);
  EXPECT_EQ(warmup.base_lr(), 0.4);
  EXPECT_EQ(warmup.last_epoch(), 0);
  EXPECT_EQ(o.sgd.lr(), 0.05);
  EXPECT_EQ(warmup.total_iters(), 938);
}

TEST(LinearLR, StateDictHoldsWhatPyTorchsDoes) {
  Optimised o(0.4);
  LinearLR scheduler(o.sgd, 0.125, 1.0, 10);
  for (int s = 0; s < 3; ++s) scheduler.step();
  const LRSchedulerStateDict state = scheduler.state_dict();
  EXPECT_EQ(state.scheduler, "LinearLR");
  EXPECT_EQ(state.last_epoch, 3);
  EXPECT_EQ(state.base_lr, 0.4);
  const std::map<std::string, double> expected = {{"start_factor", 0.125}, {"end_factor", 1.0}, {"total_iters", 10}};
  EXPECT_EQ(state.hyper_parameters, expected);
}

TEST(LinearLR, ALoadedStateContinuesExactly) {
  Optimised straight(0.4);
  LinearLR reference(straight.sgd, 0.125, 1.0, 10);
  Optimised first(0.4);
  LinearLR before(first.sgd, 0.125, 1.0, 10);
  for (int s = 0; s < 4; ++s) {
    reference.step();
    before.step();
  }
  // Another optimiser and other settings: the loaded state replaces them all (the optimiser's
  // learning rate is the optimiser's own state, loaded apart as in PyTorch).
  Optimised resumed(0.1);
  LinearLR after(resumed.sgd, 0.5, 0.5, 3);
  after.load_state_dict(before.state_dict());
  resumed.sgd.load_state_dict(first.sgd.state_dict());
  EXPECT_EQ(after.get_last_lr(), before.get_last_lr());
  EXPECT_EQ(resumed.sgd.lr(), first.sgd.lr());
  for (int s = 4; s < 12; ++s) {
    reference.step();
    after.step();
    EXPECT_EQ(after.get_last_lr(), reference.get_last_lr()) << "t=" << s + 1;
    EXPECT_EQ(resumed.sgd.lr(), straight.sgd.lr());
  }
  EXPECT_EQ(after.start_factor(), 0.125);
  EXPECT_EQ(after.end_factor(), 1.0);
  EXPECT_EQ(after.total_iters(), 10);
}

// ---- bad input ------------------------------------------------------------------------------------

TEST(LinearLR, RefusesFactorsOutsideTheirRanges) {
  Optimised o(0.1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double start : {0.0, -0.5, 1.5, nan})
    expect_error([&] { LinearLR(o.sgd, start); }, "LinearLR: expected start_factor in (0, 1], got ");
  expect_error([&] { LinearLR(o.sgd, 0.0); },
               "got 0; the first learning rate is start_factor x the optimiser's (to warm up to k x a rate, build "
               "the optimiser with k x the rate and pass start_factor 1/k)");
  for (double end : {-0.1, 2.0, nan})
    expect_error([&] { LinearLR(o.sgd, 0.5, end); }, "LinearLR: expected end_factor in [0, 1], got ");
  EXPECT_EQ(o.sgd.lr(), 0.1) << "a refused scheduler leaves the learning rate alone";
}

TEST(LinearLR, RefusesALineOfNoSteps) {
  Optimised o(0.1);
  for (int64_t total : {0, -3})
    expect_error([&] { LinearLR(o.sgd, 0.5, 1.0, total); },
                 "LinearLR: expected total_iters, the steps the line takes, to be a whole number of 1 or more, got " +
                     std::to_string(total));
}

// A second scheduler class, as one written outside the library would be: a constant factor.
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& optimizer, double factor) : LRScheduler("ConstantLR", optimizer), factor_(factor) {
    initial_step();
  }

 protected:
  double closed_form_lr(int64_t) const override { return base_lr() * factor_; }
  std::map<std::string, double> hyper_parameters() const override { return {{"factor", factor_}}; }
  void set_hyper_parameters(const std::map<std::string, double>& settings, const std::string&, bool apply) override {
    if (apply) factor_ = settings.at("factor");
  }

 private:
  double factor_;
};

TEST(LinearLR, RefusesTheStateOfAnotherSchedulerAndChangesNothing) {
  Optimised a(0.1), b(0.4);
  ConstantLR constant(a.sgd, 0.5);
  LinearLR linear(b.sgd, 0.125, 1.0, 10);
  linear.step();
  expect_error([&] { linear.load_state_dict(constant.state_dict()); },
               "LinearLR.load_state_dict: the state dict is a ConstantLR's, this scheduler is a LinearLR; build the "
               "scheduler the state was saved from");
  EXPECT_EQ(linear.last_epoch(), 1);
  EXPECT_EQ(linear.get_last_lr(), 0.085);
}

TEST(LinearLR, RefusesADamagedStateAndChangesNothing) {
  Optimised o(0.4);
  LinearLR scheduler(o.sgd, 0.125, 1.0, 10);
  const LRSchedulerStateDict good = scheduler.state_dict();
  LRSchedulerStateDict bad = good;
  bad.last_epoch = -1;
  expect_error([&] { scheduler.load_state_dict(bad); },
               "LinearLR.load_state_dict: last_epoch is -1; expected a step count of 0 or more");
  bad = good;
  bad.hyper_parameters.erase("total_iters");
  expect_error([&] { scheduler.load_state_dict(bad); }, "LinearLR.load_state_dict: the state dict has no \"total_iters\"");
  bad = good;
  bad.hyper_parameters["total_iters"] = 2.5;
  expect_error([&] { scheduler.load_state_dict(bad); },
               "LinearLR.load_state_dict: expected total_iters, the steps the line takes, to be a whole number");
  bad = good;
  bad.hyper_parameters["start_factor"] = 0.0;
  bad.last_epoch = 5;
  expect_error([&] { scheduler.load_state_dict(bad); }, "LinearLR.load_state_dict: expected start_factor in (0, 1]");
  bad = good;
  bad.hyper_parameters["gamma"] = 0.1;
  expect_error([&] { scheduler.load_state_dict(bad); },
               "the state dict has a setting \"gamma\" that LinearLR does not have; was it saved from another scheduler?");
  EXPECT_EQ(scheduler.last_epoch(), 0);
  EXPECT_EQ(scheduler.start_factor(), 0.125);
  EXPECT_EQ(scheduler.total_iters(), 10);
}

// ---- in a checkpoint ------------------------------------------------------------------------------

// The same small model every time.
std::shared_ptr<Linear> seeded_model() {
  manual_seed(0);
  return std::make_shared<Linear>(3, 2);
}

// A model, SGD at the large-batch rate and a warm-up from 1/8 of it, as chapter 6 builds them.
struct WarmUpRun {
  WarmUpRun() : model(seeded_model()), sgd(model->parameters(), SGDOptions(0.4).momentum(0.9)),
          warmup(sgd, 0.125, 1.0, 10) {}
  void step() {
    manual_seed(static_cast<uint64_t>(warmup.last_epoch()));
    sgd.zero_grad();
    sum((*model)(randn({4, 3}))).backward();
    sgd.step();
    warmup.step();
  }
  TrainingState state(bool with_scheduler) {
    TrainingState s;
    s.model = model.get();
    s.optimizer = &sgd;
    s.scheduler = with_scheduler ? &warmup : nullptr;
    return s;
  }
  std::shared_ptr<Linear> model;
  SGD sgd;
  LinearLR warmup;
};

class SchedulerCheckpoint : public test::TempDirTest {
 protected:
  const std::string path_ = file("ckpt.safetensors");
};

TEST_F(SchedulerCheckpoint, AResumedWarmUpContinuesBitForBit) {
  WarmUpRun whole, first;
  for (int s = 0; s < 3; ++s) {
    whole.step();
    first.step();
  }
  TrainingState saved = first.state(true);
  save_checkpoint(path_, saved, 0, 1);
  for (int s = 3; s < 12; ++s) whole.step();

  WarmUpRun resumed;  // freshly built: at step 0 of its warm-up
  TrainingState state = resumed.state(true);
  const ResumeInfo info = load_checkpoint(path_, state, Device::cpu(), 0, 1);
  EXPECT_TRUE(info.bit_exact);
  EXPECT_TRUE(info.notes.empty());
  EXPECT_EQ(resumed.warmup.last_epoch(), 3);
  EXPECT_EQ(resumed.sgd.lr(), first.sgd.lr());
  for (int s = 3; s < 12; ++s) resumed.step();
  EXPECT_EQ(resumed.sgd.lr(), whole.sgd.lr());
  EXPECT_EQ(resumed.model->weight.contiguous().to_vector<float>(), whole.model->weight.contiguous().to_vector<float>());
}

TEST_F(SchedulerCheckpoint, ASchedulerOnOneSideOnlyIsANote) {
  WarmUpRun a;
  a.step();
  TrainingState without = a.state(false);
  save_checkpoint(path_, without, 0, 1);
  WarmUpRun b;
  TrainingState with = b.state(true);
  ResumeInfo info = load_checkpoint(path_, with, Device::cpu(), 0, 1);
  EXPECT_FALSE(info.bit_exact);
  ASSERT_EQ(info.notes.size(), 1u);
  EXPECT_EQ(info.notes[0], "the checkpoint holds no learning-rate scheduler state: the scheduler starts afresh");

  TrainingState saved_with = a.state(true);
  save_checkpoint(path_, saved_with, 0, 1);
  TrainingState not_given = b.state(false);
  info = load_checkpoint(path_, not_given, Device::cpu(), 0, 1);
  EXPECT_FALSE(info.bit_exact);
  ASSERT_EQ(info.notes.size(), 1u);
  EXPECT_NE(info.notes[0].find("scheduler state was not restored (no scheduler was given)"), std::string::npos);
}

TEST_F(SchedulerCheckpoint, AnotherSchedulerClassIsNamedAndNothingChanges) {
  WarmUpRun a;
  a.step();
  TrainingState saved = a.state(true);
  save_checkpoint(path_, saved, 0, 1);
  WarmUpRun b;
  ConstantLR constant(b.sgd, 0.5);
  TrainingState state = b.state(false);
  state.scheduler = &constant;
  const std::vector<float> weight = b.model->weight.contiguous().to_vector<float>();
  const double lr = b.sgd.lr();
  expect_error([&] { load_checkpoint(path_, state, Device::cpu(), 0, 1); },
               "'" + path_ + "': ConstantLR.load_state_dict: the state dict is a LinearLR's, this scheduler is a "
               "ConstantLR");
  EXPECT_EQ(b.sgd.lr(), lr) << "the optimiser was not loaded";
  EXPECT_EQ(b.model->weight.contiguous().to_vector<float>(), weight);
}

}  // namespace
}  // namespace lockstep
