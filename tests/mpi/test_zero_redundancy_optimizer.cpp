// ZeroRedundancyOptimizer (ZeRO-1) on 2 and 3 ranks: PyTorch's greedy partition; every rank's
// weights bitwise those of a plain optimiser given the same gradients, for Adam and SGD with
// momentum; state kept for the own partition alone; the consolidated state_dict equal to the
// plain optimiser's, and loading it continues the same run; under DDP as a plain Adam; the errors.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mpi_test_util.h"

namespace lockstep {
namespace {

using test::group;

// A model's parameters of uneven sizes (so that the partition has work to do), the same on
// every rank: weights and biases of three layers, 150 to 3 elements.
std::vector<Tensor> make_params(uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> params;
  for (const Shape& shape : std::vector<Shape>{{10, 15}, {10}, {6, 10}, {6}, {3, 6}, {3}}) {
    params.push_back(randn(shape, {}, &gen).requires_grad_());
  }
  return params;
}

// The gradients of step `step`, the same on every rank (as DDP's averaging leaves them).
void set_gradients(const std::vector<Tensor>& params, int step) {
  Generator gen(1000 + step);
  for (const Tensor& p : params) p.set_grad(randn(p.shape(), {}, &gen));
}

OptimizerFactory adam() {
  return [](std::vector<Tensor> p) { return std::make_unique<Adam>(std::move(p), AdamOptions(0.01)); };
}
OptimizerFactory sgd_momentum() {
  return [](std::vector<Tensor> p) { return std::make_unique<SGD>(std::move(p), SGDOptions(0.1).momentum(0.9)); };
}

void expect_bitwise_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << what << ", element " << i;
}

TEST(ZeroPartition, GreedyLargestFirstToTheLightestRank) {
  // Sizes 150, 10, 60, 6, 18, 3 on 2 ranks: 150 -> 0, 60 -> 1, 18 -> 1, 10 -> 1, 6 -> 1 (94),
  // 3 -> 1 (97 < 150).
  EXPECT_EQ(partition_parameters({150, 10, 60, 6, 18, 3}, 2), (std::vector<int>{0, 1, 1, 1, 1, 1}));
  // Equal sizes keep their order, ties go to the lowest rank.
  EXPECT_EQ(partition_parameters({4, 4, 4, 4}, 3), (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(partition_parameters({5}, 1), (std::vector<int>{0}));
}

class ZeroSteps : public testing::TestWithParam<std::string> {};

TEST_P(ZeroSteps, WeightsBitwiseAPlainOptimizersOnEveryRank) {
  const OptimizerFactory make = GetParam() == "adam" ? adam() : sgd_momentum();
  const std::vector<Tensor> sharded = make_params(3), plain = make_params(3);
  ZeroRedundancyOptimizer zero(sharded, group(), make);
  const std::unique_ptr<Optimizer> reference = make(plain);
  for (int step = 0; step < 4; ++step) {
    set_gradients(sharded, step);
    set_gradients(plain, step);
    zero.step();
    reference->step();
    zero.zero_grad();
    reference->zero_grad();
  }
  for (size_t i = 0; i < plain.size(); ++i) {
    expect_bitwise_equal(sharded[i], plain[i], GetParam() + ", parameter " + std::to_string(i));
    test::expect_same_on_every_rank(sharded[i], "parameter " + std::to_string(i) + " after 4 sharded steps");
    EXPECT_FALSE(sharded[i].grad().defined()) << "zero_grad clears every parameter's gradient, owned or not";
  }
  // The state lives on the owner alone: this rank's optimiser holds its partition.
  EXPECT_EQ(zero.optimizer().params().size(), zero.partition(group().rank()).size());
  EXPECT_LT(zero.optimizer().params().size(), plain.size()) << "with 2 or more ranks no rank holds every parameter";
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ZeroSteps, testing::Values("adam", "sgd"));

// Under DDP, as it is used: the CNN of chapter 2 on each rank's own batches, one copy stepped
// by ZeroRedundancyOptimizer and one by a plain Adam, from the same weights: the same weights,
// bitwise, on every rank, after every step.
TEST(ZeroUnderDdp, StepsAsAPlainAdamOnEveryRank) {
  const int rank = group().rank(), world = group().size();
  manual_seed(11);
  auto zero_model = std::make_shared<DistributedDataParallel>(make_model("cnn"));
  manual_seed(11);
  auto plain_model = std::make_shared<DistributedDataParallel>(make_model("cnn"));
  ZeroRedundancyOptimizer zero(zero_model->parameters(), group(), adam());
  Adam plain(plain_model->parameters(), AdamOptions(0.01));
  for (int step = 0; step < 3; ++step) {
    Generator gen(2000 + step * world + rank);
    std::vector<int64_t> labels(8);
    for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
    const Tensor x = randn({8, 1, 28, 28}, {}, &gen), y = from_vector(labels, {8});
    zero.zero_grad();
    plain.zero_grad();
    cross_entropy((*zero_model)(x), y).backward();
    cross_entropy((*plain_model)(x), y).backward();
    zero.step();
    plain.step();
  }
  const std::vector<Tensor> got = zero_model->parameters(), want = plain_model->parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    expect_bitwise_equal(got[i], want[i], "parameter " + std::to_string(i) + " after 3 DDP steps");
    test::expect_same_on_every_rank(got[i], "parameter " + std::to_string(i) + " under DDP and ZeRO-1");
  }
}

TEST(ZeroStateDict, ConsolidatedEqualsAPlainOptimizersAndLoadsBack) {
  const std::vector<Tensor> sharded = make_params(5), plain = make_params(5);
  ZeroRedundancyOptimizer zero(sharded, group(), adam());
  Adam reference(plain, AdamOptions(0.01));
  for (int step = 0; step < 3; ++step) {
    set_gradients(sharded, step);
    set_gradients(plain, step);
    zero.step();
    reference.step();
  }
  const int to = group().size() - 1;
  zero.consolidate_state_dict(to);
  if (group().rank() == to) {
    const OptimizerStateDict got = zero.state_dict(), want = reference.state_dict();
    EXPECT_EQ(got.optimizer, want.optimizer);
    EXPECT_EQ(got.num_params, want.num_params);
    EXPECT_EQ(got.param_group, want.param_group);
    ASSERT_EQ(got.state.size(), want.state.size());
    for (size_t i = 0; i < want.state.size(); ++i) {
      EXPECT_EQ(got.state[i].first, want.state[i].first) << "entry " << i;
      expect_bitwise_equal(got.state[i].second, want.state[i].second, want.state[i].first);
    }
  } else {
    EXPECT_THROW(
        {
          try {
            (void)zero.state_dict();
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("the state was consolidated on rank " + std::to_string(to)),
                      std::string::npos)
                << e.what();
            throw;
          }
        },
        Error);
  }

  // A fresh sharded optimiser loaded from the plain one's state continues its run bitwise.
  const std::vector<Tensor> resumed = make_params(5);
  for (size_t i = 0; i < resumed.size(); ++i) {
    NoGradGuard no_grad;
    resumed[i].copy_(plain[i]);
  }
  ZeroRedundancyOptimizer loaded(resumed, group(), adam());
  loaded.load_state_dict(reference.state_dict());
  set_gradients(resumed, 3);
  set_gradients(plain, 3);
  loaded.step();
  reference.step();
  for (size_t i = 0; i < plain.size(); ++i) {
    expect_bitwise_equal(resumed[i], plain[i], "after load_state_dict and one step, parameter " + std::to_string(i));
  }
}

TEST(ZeroStateDict, StateDictBeforeConsolidatingOrAfterAStepIsAnError) {
  const std::vector<Tensor> params = make_params(7);
  ZeroRedundancyOptimizer zero(params, group(), sgd_momentum());
  EXPECT_THROW((void)zero.state_dict(), Error);
  set_gradients(params, 0);
  zero.consolidate_state_dict(0);
  zero.step();
  try {
    (void)zero.state_dict();
    FAIL() << "state_dict after a step must ask for a new consolidate_state_dict";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("call consolidate_state_dict(to) on every rank first"), std::string::npos)
        << e.what();
  }
}

TEST(ZeroErrors, SayWhatIsWrong) {
  // More ranks than parameters: every rank refuses alike, naming the rank left without one.
  if (group().size() > 1) {
    Generator gen(1);
    const std::vector<Tensor> one{randn({4}, {}, &gen).requires_grad_()};
    try {
      ZeroRedundancyOptimizer zero(one, group(), adam());
      FAIL() << "a rank without parameters must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 of " + std::to_string(group().size()) + " would own no parameter"),
                std::string::npos)
          << e.what();
    }
  }
  // Parameters of two dtypes cannot travel as one buffer.
  std::vector<Tensor> mixed = make_params(2);
  mixed[1] = mixed[1].detach().to(DType::f64).requires_grad_();
  EXPECT_THROW(ZeroRedundancyOptimizer(mixed, group(), adam()), Error);
  // A state dict of another number of parameters.
  ZeroRedundancyOptimizer zero(make_params(2), group(), adam());
  OptimizerStateDict wrong = Adam(make_params(2), AdamOptions(0.01)).state_dict();
  wrong.num_params = 5;
  EXPECT_THROW(zero.load_state_dict(wrong), Error);
}

}  // namespace
}  // namespace lockstep
