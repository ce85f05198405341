// Join under mpirun: ranks with different numbers of batches finish together, in lockstep, and
// with the mathematics of zero gradients from the ranks that ran out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::gather_from_all;
using test::group;

struct Batch {
  Tensor x;  // x: (n, 1, 28, 28), or (n, 3, 16, 16) for the ResNet
  Tensor y;  // y: (n,) class indices
};

// Rank `rank`'s batch number `step`, the same on every rank that asks for it (the reference
// computation of one process asks for every rank's).
Batch batch_of(int rank, int step, DType dtype = DType::f32, const std::string& model = "mlp", int64_t n = 4) {
  Generator gen(1000 + 100 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(step));
  const Shape shape = model == "resnet" ? Shape{n, 3, 16, 16} : Shape{n, 1, 28, 28};
  std::vector<int64_t> labels(n);
  for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
  return {randn(shape, TensorOptions().dtype(dtype), &gen), from_vector(labels, {n})};
}

// Uneven inputs: rank r has 5 + 2r batches, so every rank but the last runs out early.
int batches_of(int rank) { return 5 + 2 * rank; }

// Every parameter (and buffer) bitwise the same on every rank.
void expect_in_lockstep(Module& model, const std::string& when) {
  for (const auto& [name, p] : model.named_parameters()) test::expect_same_on_every_rank(p, name + ", " + when);
  const InSyncReport report = check_in_sync(model, group());
  EXPECT_TRUE(report.in_sync) << when << ": " << report.difference;
}

// ---- uneven inputs finish, in lockstep -----------------------------------------------------------

// Without Join the first rank to run out would leave the others waiting in their next forward's
// all-reduce; with it every rank leaves the loop, and all hold the same weights.
TEST(Join, UnevenBatchesFinishAndEveryRankHoldsTheSameModel) {
  const int rank = group().rank(), world = group().size();
  manual_seed(20 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  const std::vector<double> first = ddp->module().parameters().front().to_vector<double>();
  // No momentum: the Join makes the models equal, not the optimizers' state (a rank that ran out
  // early holds the momentum of its own last step), and the test goes on training afterwards.
  SGD opt(ddp->parameters(), SGDOptions(0.05));
  int64_t shadowed = -1, forwards = -1;
  {
    Join join(ddp);
    for (int step = 0; step < batches_of(rank); ++step) {
      const Batch b = batch_of(rank, step);
      opt.zero_grad();
      cross_entropy((*ddp)(b.x), b.y).backward();
      opt.step();
    }
    join.finish();
    shadowed = join.shadowed_iterations();
    forwards = join.forwards();
  }
  EXPECT_EQ(forwards, batches_of(rank));
  // Rank r shadowed every iteration of the last rank after its own last one.
  EXPECT_EQ(shadowed, batches_of(world - 1) - batches_of(rank));
  expect_in_lockstep(ddp->module(), "after the Join");
  EXPECT_NE(ddp->module().parameters().front().to_vector<double>(), first) << "nothing was trained";
  // Afterwards the forwards are plain again: an even step still averages.
  const Batch b = batch_of(rank, 99);
  opt.zero_grad();
  cross_entropy((*ddp)(b.x), b.y).backward();
  opt.step();
  expect_in_lockstep(ddp->module(), "after a step following the Join");
}

// The same with BatchNorm: the ranks that ran out shadow the buffer broadcast of every forward
// (from the lowest rank still training), and take the last rank's buffers at the end.
TEST(Join, UnevenBatchesWithBuffersFinishInLockstep) {
  const int rank = group().rank();
  manual_seed(30 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("resnet"));
  SGD opt(ddp->parameters(), SGDOptions(0.05));
  {
    Join join(ddp);
    for (int step = 0; step < 1 + rank; ++step) {
      const Batch b = batch_of(rank, step, DType::f32, "resnet", 2);
      opt.zero_grad();
      cross_entropy((*ddp)(b.x), b.y).backward();
      opt.step();
    }
  }
  // Buffers included: the last rank's BatchNorm statistics, after its last forward, everywhere.
  expect_in_lockstep(ddp->module(), "after the Join");
}

// ---- the mathematics ------------------------------------------------------------------------------

class JoinMatchesOneProcess : public testing::TestWithParam<bool> {};

// In f64, the Join's steps equal those of one process that, at each step, sums the mean losses
// of the ranks still training and divides by the world size (a rank that ran out contributes a
// zero gradient), or, with divide_by_initial_world_size(false), by the number of ranks still
// training.
TEST_P(JoinMatchesOneProcess, FinishedRanksContributeZeros) {
  const bool by_initial = GetParam();
  const int rank = group().rank(), world = group().size();
  manual_seed(40);
  std::shared_ptr<Module> reference = make_model("mlp");
  reference->to(DType::f64);
  manual_seed(40);
  std::shared_ptr<Module> model = make_model("mlp");
  model->to(DType::f64);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  SGD ref_opt(reference->parameters(), SGDOptions(0.1).momentum(0.9));
  SGD opt(ddp->parameters(), SGDOptions(0.1).momentum(0.9));

  for (int step = 0; step < batches_of(world - 1); ++step) {
    std::vector<int> active;
    for (int r = 0; r < world; ++r) {
      if (step < batches_of(r)) active.push_back(r);
    }
    const double divisor = by_initial ? world : static_cast<double>(active.size());
    ref_opt.zero_grad();
    Tensor total;
    for (int r : active) {
      const Batch b = batch_of(r, step, DType::f64);
      const Tensor loss = cross_entropy((*reference)(b.x), b.y) * (1.0 / divisor);
      total = total.defined() ? total + loss : loss;
    }
    total.backward();
    ref_opt.step();
  }
  {
    Join join(ddp, JoinOptions().divide_by_initial_world_size(by_initial));
    for (int step = 0; step < batches_of(rank); ++step) {
      const Batch b = batch_of(rank, step, DType::f64);
      opt.zero_grad();
      cross_entropy((*ddp)(b.x), b.y).backward();
      opt.step();
    }
  }
  const auto expected = reference->named_parameters();
  const auto got = model->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<double> g = got[i].second.to_vector<double>(), e = expected[i].second.to_vector<double>();
    for (size_t k = 0; k < g.size(); ++k) {
      ASSERT_NEAR(g[k], e[k], 1e-10 * (1 + std::abs(e[k]))) << got[i].first << ", element " << k;
    }
  }
  expect_in_lockstep(*model, "after the Join");
}

INSTANTIATE_TEST_SUITE_P(DivideByInitialWorldSize, JoinMatchesOneProcess, testing::Values(true, false));

// With even inputs a Join changes nothing: the same steps as without one, bit for bit (with
// several buckets, so that every bucket's all-reduce runs as without the Join).
TEST(Join, EvenInputsGiveBitwiseTheStepsOfNoJoin) {
  const int rank = group().rank();
  const auto caps = DistributedDataParallelOptions().first_bucket_cap_mb(0.001).bucket_cap_mb(0.004);
  std::vector<std::vector<double>> params[2];
  for (const bool joined : {false, true}) {
    manual_seed(50 + rank);
    auto ddp = std::make_shared<DistributedDataParallel>(make_model("cnn"), caps);
    ASSERT_GT(ddp->buckets().size(), 1u);
    SGD opt(ddp->parameters(), SGDOptions(0.05).momentum(0.9));
    auto train = [&] {
      for (int step = 0; step < 3; ++step) {
        const Batch b = batch_of(rank, step);
        opt.zero_grad();
        cross_entropy((*ddp)(b.x), b.y).backward();
        opt.step();
      }
    };
    if (joined) {
      Join join(ddp);
      train();
      join.finish();
      EXPECT_EQ(join.shadowed_iterations(), 0);
    } else {
      train();
    }
    for (const Tensor& p : ddp->module().parameters()) params[joined].push_back(p.to_vector<double>());
  }
  ASSERT_EQ(params[0].size(), params[1].size());
  for (size_t i = 0; i < params[0].size(); ++i) EXPECT_EQ(params[1][i], params[0][i]) << "parameter " << i;
}

// ---- other kinds of iterations ----------------------------------------------------------------------

// Gradient accumulation inside a Join: the ranks that ran out shadow the no_sync() forwards
// (buffers only) and the averaging ones (every bucket) alike.
TEST(Join, NoSyncAccumulationWithUnevenInputs) {
  const int rank = group().rank();
  manual_seed(60 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  SGD opt(ddp->parameters(), SGDOptions(0.05));
  {
    Join join(ddp);
    for (int step = 0; step < 2 + rank; ++step) {
      opt.zero_grad();
      {
        auto guard = ddp->no_sync();
        const Batch b = batch_of(rank, 2 * step);
        cross_entropy((*ddp)(b.x), b.y).backward();
      }
      const Batch b = batch_of(rank, 2 * step + 1);
      cross_entropy((*ddp)(b.x), b.y).backward();
      opt.step();
    }
  }
  expect_in_lockstep(ddp->module(), "after the Join");
}

// A model whose parameters some ranks leave unused: the ranks that ran out also shadow the
// all-reduce that finds them.
class TwoHeads : public Module {
 public:
  TwoHeads() {
    body = register_module("body", std::make_shared<Linear>(6, 3));
    head = register_module("head", std::make_shared<Linear>(6, 3));
  }
  Tensor forward(const Tensor& x) override { return use_head ? (*body)(x) + (*head)(x) : (*body)(x); }
  std::shared_ptr<Linear> body, head;
  bool use_head = true;
};

TEST(Join, FindUnusedParametersWithUnevenInputs) {
  const int rank = group().rank();
  manual_seed(70);
  auto model = std::make_shared<TwoHeads>();
  auto ddp = std::make_shared<DistributedDataParallel>(model, DistributedDataParallelOptions().find_unused_parameters(true));
  SGD opt(ddp->parameters(), SGDOptions(0.05));
  Generator gen(80 + rank);
  {
    Join join(ddp);
    for (int step = 0; step < 2 + 2 * rank; ++step) {
      model->use_head = (step + rank) % 2 == 0;
      opt.zero_grad();
      sum((*ddp)(randn({5, 6}, {}, &gen))).backward();
      opt.step();
    }
  }
  expect_in_lockstep(*model, "after the Join");
}

// ---- errors --------------------------------------------------------------------------------------------

// throw_on_early_termination: as soon as rank 0 runs out, every rank throws, naming it, after
// the same number of steps; the wrapper is usable afterwards.
TEST(Join, ThrowOnEarlyTerminationStopsEveryRankNamingTheOneThatRanOut) {
  const int rank = group().rank(), world = group().size();
  manual_seed(90 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  SGD opt(ddp->parameters(), SGDOptions(0.05));
  int steps = 0;
  std::string others;
  for (int r = 1; r < world; ++r) others += (others.empty() ? "" : ", ") + std::to_string(r);
  const std::string expected =
      rank == 0 ? "Join: this rank (0) ran out of inputs after 3 forward(s) while rank(s) " + others + " still had some"
                : "Join: rank(s) 0 ran out of inputs while this rank (" + std::to_string(rank) +
                      ") still had some, after 3 forward(s) here, and throw_on_early_termination is on";
  // Rank 0 throws from the Join's destructor at the end of the scope, the others from their
  // fourth forward (after which the destructor, with an exception passing, does nothing).
  test::expect_error(
      [&] {
        Join join(ddp, JoinOptions().throw_on_early_termination(true));
        for (int step = 0; step < (rank == 0 ? 3 : 6); ++step) {
          const Batch b = batch_of(rank, step);
          opt.zero_grad();
          cross_entropy((*ddp)(b.x), b.y).backward();
          opt.step();
          ++steps;
        }
      },
      expected);
  EXPECT_EQ(steps, 3);
  expect_in_lockstep(ddp->module(), "after the early termination");
  // The wrapper left the Join: a plain step and a new Join work.
  EXPECT_EQ(ddp->active_join(), nullptr);
  {
    Join join(ddp);
    const Batch b = batch_of(rank, 10);
    opt.zero_grad();
    cross_entropy((*ddp)(b.x), b.y).backward();
    opt.step();
  }
  expect_in_lockstep(ddp->module(), "after a Join following the early termination");
}

// With even inputs throw_on_early_termination never throws.
TEST(Join, ThrowOnEarlyTerminationWithEvenInputsDoesNotThrow) {
  const int rank = group().rank();
  manual_seed(95);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  Join join(ddp, JoinOptions().throw_on_early_termination(true));
  for (int step = 0; step < 2; ++step) {
    const Batch b = batch_of(rank, step);
    cross_entropy((*ddp)(b.x), b.y).backward();
  }
  EXPECT_NO_THROW(join.finish());
}

// Inside a Join the ranks still training must agree on each iteration's kind: one rank inside
// no_sync() while another averages is named on every rank (without Join it would hang).
TEST(Join, RanksDisagreeingOnNoSyncAreNamed) {
  const int rank = group().rank(), world = group().size();
  manual_seed(96);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  std::string averaging;
  for (int r = 1; r < world; ++r) averaging += (averaging.empty() ? "" : ", ") + std::to_string(r);
  Join join(ddp);
  const Batch b = batch_of(rank, 0);
  test::expect_error(
      [&] {
        if (rank == 0) {
          auto guard = ddp->no_sync();
          (*ddp)(b.x);
        } else {
          (*ddp)(b.x);
        }
      },
      "in this iteration rank(s) " + averaging +
          " ran a forward whose backward averages gradients, but rank(s) 0 one whose backward stays local");
  join.finish();
}

TEST(Join, AModelIsInOneJoinAtATime) {
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  Join outer(ddp);
  EXPECT_EQ(ddp->active_join(), &outer);
  test::expect_error([&] { Join inner(ddp); }, "Join: this model is already in a Join");
  outer.finish();
  EXPECT_EQ(ddp->active_join(), nullptr);
}

// enable(false): a Join that does nothing, so the uneven-free loop runs exactly as without one.
TEST(Join, ADisabledJoinLeavesTheForwardsPlain) {
  const int rank = group().rank();
  manual_seed(97);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  Join join(ddp, JoinOptions().enable(false));
  EXPECT_EQ(ddp->active_join(), nullptr);
  const Batch b = batch_of(rank, 0);
  cross_entropy((*ddp)(b.x), b.y).backward();
  join.finish();
  EXPECT_EQ(join.forwards(), 0);
  test::expect_same_on_every_rank(ddp->module().parameters().front().grad(), "the averaged gradient");
}

}  // namespace
}  // namespace lockstep
