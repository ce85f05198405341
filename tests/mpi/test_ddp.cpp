// DistributedDataParallel under mpirun: the promises a user doubts, each checked on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <cmath>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::gather_from_all;
using test::group;

// A batch of random images and labels, the same for the same seed on every rank.
struct Batch {
  Tensor x;  // x: (n, C, H, W)
  Tensor y;  // y: (n,) class indices
};

Batch make_batch(const std::string& model, int64_t n, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  const Shape shape = model == "resnet" ? Shape{n, 3, 16, 16} : Shape{n, 1, 28, 28};
  std::vector<int64_t> labels(n);
  for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
  return {randn(shape, TensorOptions().dtype(dtype), &gen), from_vector(labels, {n})};
}

Batch rows(const Batch& b, int64_t start, int64_t end) { return {b.x.slice(0, start, end), b.y.slice(0, start, end)}; }

// Every element of `a` within `rel` (relative) of `b`.
void expect_close(const Tensor& a, const Tensor& b, double rel, const std::string& what) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  ASSERT_EQ(av.size(), bv.size()) << what;
  for (size_t i = 0; i < av.size(); ++i) {
    ASSERT_LE(std::abs(av[i] - bv[i]), rel * std::abs(bv[i]) + 1e-12) << what << ", element " << i;
  }
}

// Every element of `got` within `rel` (relative) of the mean over ranks of `per_rank`, as
// gather_from_all returns it: what averaging gradients must give.
void expect_mean_over_ranks(const Tensor& got, const std::vector<std::vector<double>>& per_rank, double rel) {
  const std::vector<double> values = got.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i) {
    double mean = 0;
    for (const auto& rank_values : per_rank) mean += rank_values[i] / static_cast<double>(per_rank.size());
    ASSERT_NEAR(values[i], mean, rel * (1 + std::abs(mean))) << "element " << i;
  }
}

// ---- bitwise identical ranks -----------------------------------------------------------------

class LockstepModels : public testing::TestWithParam<std::string> {};

// Each rank starts from its own random weights and trains on its own data; DDP's broadcast and
// averaged gradients must still leave every parameter bitwise identical on every rank.
TEST_P(LockstepModels, ParametersAndBuffersBitwiseIdenticalAfterSteps) {
  const std::string name = GetParam();
  const int rank = group().rank(), world = group().size();
  manual_seed(100 + rank);
  auto ddp = std::make_shared<DistributedDataParallel>(make_model(name));
  const Tensor first = ddp->module().parameters().front().clone();
  SGD opt(ddp->parameters(), SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  const int64_t batch = name == "resnet" ? 4 : 8;
  for (int step = 0; step < 4; ++step) {
    const Batch b = make_batch(name, batch, 1000 + step * world + rank);
    opt.zero_grad();
    cross_entropy((*ddp)(b.x), b.y).backward();
    opt.step();
  }
  // Parameters: identical, and trained.
  for (const auto& [pname, p] : ddp->module().named_parameters()) test::expect_same_on_every_rank(p, pname);
  EXPECT_NE(ddp->module().parameters().front().to_vector<double>(), first.to_vector<double>());
  if (name == "resnet") {
    // BatchNorm's running statistics were updated by each rank's last forward on its own data:
    // they differ until the next forward broadcasts rank 0's.
    const InSyncReport before = check_in_sync(ddp->module(), group());
    EXPECT_FALSE(before.in_sync);
    EXPECT_NE(before.difference.find("running_"), std::string::npos) << before.difference;
    ddp->eval();
    NoGradGuard no_grad;
    (*ddp)(make_batch(name, 2, 7).x);
  }
  const InSyncReport report = check_in_sync(ddp->module(), group());
  EXPECT_TRUE(report.in_sync) << report.difference;
  test::expect_same_on_every_rank(full({1}, static_cast<double>(report.checksum % 1000003)), "the checksum");
}

INSTANTIATE_TEST_SUITE_P(Models, LockstepModels, testing::Values("mlp", "cnn", "resnet"));

// ---- the same mathematics as one process -----------------------------------------------------

class MatchesOneProcess : public testing::TestWithParam<std::string> {};

// N ranks with batch B each take the same steps as one process with batch N*B (BN-free models;
// in f64 so that only the order of additions differs).
void expect_steps_match_one_process(const std::string& name, const DistributedDataParallelOptions& options) {
  const int rank = group().rank(), world = group().size();
  const int64_t batch = 4;
  manual_seed(7);
  std::shared_ptr<Module> reference = make_model(name);
  reference->to(DType::f64);
  manual_seed(7);
  std::shared_ptr<Module> model = make_model(name);
  model->to(DType::f64);
  auto ddp = std::make_shared<DistributedDataParallel>(model, options);
  SGD ref_opt(reference->parameters(), SGDOptions(0.1).momentum(0.9));
  SGD opt(ddp->parameters(), SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const Batch whole = make_batch(name, world * batch, 50 + step, DType::f64);
    ref_opt.zero_grad();
    cross_entropy((*reference)(whole.x), whole.y).backward();
    ref_opt.step();
    const Batch mine = rows(whole, rank * batch, (rank + 1) * batch);
    opt.zero_grad();
    cross_entropy((*ddp)(mine.x), mine.y).backward();
    opt.step();
  }
  const auto expected = reference->named_parameters();
  const auto got = ddp->module().named_parameters();
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].second, expected[i].second, 1e-5, got[i].first);
}

TEST_P(MatchesOneProcess, OnEveryParameterAfterSeveralSteps) {
  expect_steps_match_one_process(GetParam(), DistributedDataParallelOptions());
}

INSTANTIATE_TEST_SUITE_P(BnFreeModels, MatchesOneProcess, testing::Values("mlp", "cnn"));

// With small caps the CNN's gradients travel in four buckets, each all-reduced as soon as it
// and every bucket before it are complete: the steps must not change.
TEST(ManyBuckets, StepsMatchOneProcessAsWithOneBucket) {
  const auto small_caps = DistributedDataParallelOptions().first_bucket_cap_mb(0.001).bucket_cap_mb(0.004);
  ASSERT_EQ(DistributedDataParallel(make_model("cnn"), small_caps).buckets().size(), 4u);
  expect_steps_match_one_process("cnn", small_caps);
}

// ---- gradient_as_bucket_view -------------------------------------------------------------------

// The same steps as with copies (set_to_none, so each backward's gradient is copied in once).
TEST(GradientAsBucketView, StepsMatchOneProcess) {
  expect_steps_match_one_process("cnn", DistributedDataParallelOptions().gradient_as_bucket_view(true));
}

// Gradients that live in the buckets are bitwise the copies' gradients, also when zero_grad(false)
// lets backward accumulate straight into the bucket.
TEST(GradientAsBucketView, GradientsLiveInTheBucketsAndMatchTheCopies) {
  const int rank = group().rank();
  manual_seed(3);
  auto copied = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  manual_seed(3);
  auto viewed = std::make_shared<DistributedDataParallel>(
      make_model("mlp"), DistributedDataParallelOptions().gradient_as_bucket_view(true));
  for (int step = 0; step < 3; ++step) {
    const Batch mine = make_batch("mlp", 4, 60 + step + 10 * rank);
    for (const auto& ddp : {copied, viewed}) {
      ddp->zero_grad(/*set_to_none=*/false);
      cross_entropy((*ddp)(mine.x), mine.y).backward();
    }
    const auto want = copied->named_parameters(), got = viewed->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].second.grad().to_vector<float>(), want[i].second.grad().to_vector<float>())
          << got[i].first << ", step " << step;
    }
  }
  std::set<const Storage*> storages;
  for (const Tensor& p : viewed->parameters()) storages.insert(p.grad().storage().get());
  EXPECT_EQ(storages.size(), viewed->buckets().size()) << "every gradient is a view of its bucket";
}

// ---- no_sync ---------------------------------------------------------------------------------

// Gradients accumulated over k micro-batches inside no_sync(), then one synchronised backward,
// equal one synchronised backward over the union of the micro-batches.
TEST(NoSync, AccumulationEqualsOneSynchronisedStepOnTheUnion) {
  const int rank = group().rank();
  const int k = 3;
  const int64_t batch = 4;
  // Two copies of one model in f64, each wrapped.
  std::vector<std::shared_ptr<DistributedDataParallel>> wrapped;
  for (int copy = 0; copy < 2; ++copy) {
    manual_seed(11);
    std::shared_ptr<Module> model = make_model("mlp");
    model->to(DType::f64);
    wrapped.push_back(std::make_shared<DistributedDataParallel>(model));
  }
  auto accumulated = wrapped[0], at_once = wrapped[1];
  std::vector<Batch> micro;
  for (int j = 0; j < k; ++j) micro.push_back(make_batch("mlp", batch, 300 + 10 * rank + j, DType::f64));

  for (int j = 0; j < k - 1; ++j) {
    auto guard = accumulated->no_sync();
    cross_entropy((*accumulated)(micro[j].x), micro[j].y).backward();
  }
  // Inside no_sync nothing was sent: each rank holds the gradient of its own data.
  const Tensor local = accumulated->module().parameters().front().grad().clone();
  const auto copies = gather_from_all(local);
  EXPECT_NE(copies[0], copies[1]) << "gradients were averaged inside no_sync()";
  cross_entropy((*accumulated)(micro[k - 1].x), micro[k - 1].y).backward();

  // The union: k micro-batch means summed = k times the mean over the union.
  std::vector<Tensor> xs, ys;
  for (const Batch& b : micro) {
    xs.push_back(b.x);
    ys.push_back(b.y);
  }
  (cross_entropy((*at_once)(cat(xs, 0)), cat(ys, 0)) * static_cast<double>(k)).backward();

  const auto a = accumulated->module().named_parameters();
  const auto b = at_once->module().named_parameters();
  for (size_t i = 0; i < a.size(); ++i) expect_close(a[i].second.grad(), b[i].second.grad(), 1e-9, a[i].first);
}

// Whether a backward averages is decided by the last forward that recorded a graph outside
// no_sync(), as in PyTorch: a forward for evaluation (under NoGradGuard) or inside no_sync()
// between that forward and its backward must not turn the averaging off.
TEST(NoSync, OtherForwardsBeforeTheBackwardLeaveItAveraged) {
  const int rank = group().rank();
  for (const bool inside_no_sync : {false, true}) {
    manual_seed(12);
    std::shared_ptr<Module> model = make_model("mlp");
    model->to(DType::f64);
    DistributedDataParallel ddp(model);
    const Batch mine = make_batch("mlp", 4, 400 + rank, DType::f64);
    const Tensor loss = cross_entropy(ddp(mine.x), mine.y);
    if (inside_no_sync) {
      auto guard = ddp.no_sync();
      ddp(mine.x);
    } else {
      NoGradGuard no_grad;
      ddp(mine.x);
    }
    loss.backward();
    test::expect_same_on_every_rank(model->parameters().front().grad(),
                                    inside_no_sync ? "gradient, forward inside no_sync()" : "gradient, forward under NoGradGuard");
  }
}

// A backward that no synchronised forward of the wrapper prepared (here: through the wrapped
// module directly) stays local; the wrapper's next forward and backward average again.
TEST(NoSync, ABackwardThroughTheWrappedModuleAloneStaysLocal) {
  const int rank = group().rank();
  manual_seed(13);
  std::shared_ptr<Module> model = make_model("mlp");
  model->to(DType::f64);
  DistributedDataParallel ddp(model);
  const Batch mine = make_batch("mlp", 4, 500 + rank, DType::f64);
  const Tensor weight = model->parameters().front();
  cross_entropy(ddp.module()(mine.x), mine.y).backward();
  const auto local = gather_from_all(weight.grad());
  EXPECT_NE(local[0], local[1]) << "a backward outside the wrapper averaged the gradients";
  model->zero_grad();
  cross_entropy(ddp(mine.x), mine.y).backward();
  test::expect_same_on_every_rank(weight.grad(), "the averaged gradient");
}

// A layer whose backward fails when asked to: an error in the middle of backward, after the
// layers above it have handed their gradients to DDP.
class FailingIdentity : public Module {
 public:
  Tensor forward(const Tensor& x) override {
    if (!fail) return x;
    return record(x.detach().clone(), "FailingBackward", {x},
                  [](const Tensor&) -> std::vector<Tensor> { throw Error("backward failed on purpose"); });
  }
  bool fail = false;
};

// A backward that fails half-way has already started the all-reduces of the buckets it
// completed. The wrapper's next forward must clear that: afterwards a no_sync() backward,
// which only rank 0 runs, starts no collective (one would pair with the other ranks' next
// all-reduce and hang), and the next synchronised step averages correctly.
TEST(NoSync, ABackwardThatFailsHalfWayLeavesNothingBehind) {
  const int rank = group().rank();
  manual_seed(17);
  auto failing = std::make_shared<FailingIdentity>();
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Linear>(6, 4));
  model->push_back(failing);
  model->push_back(std::make_shared<Linear>(4, 3));
  model->to(DType::f64);
  // Tiny caps: one bucket per parameter, so the last layer's start before the failure.
  DistributedDataParallel ddp(model, DistributedDataParallelOptions().first_bucket_cap_mb(1e-5).bucket_cap_mb(1e-5));
  ASSERT_EQ(ddp.buckets().size(), 4u);
  Generator gen(40 + rank);
  const Tensor x = randn({5, 6}, TensorOptions().dtype(DType::f64), &gen);
  // Each rank's own gradient first: a backward that no forward of the wrapper armed is local.
  const Tensor weight = model->parameters().front();  // "0.weight"
  sum(ddp.module()(x)).backward();
  const auto local = gather_from_all(weight.grad());
  model->zero_grad();

  failing->fail = true;
  test::expect_error([&] { sum(ddp(x)).backward(); }, "backward failed on purpose");
  failing->fail = false;
  {
    // Every rank's forward clears what the failure left; only rank 0 goes on to backward.
    auto guard = ddp.no_sync();
    const Tensor loss = sum(ddp(x));
    if (rank == 0) loss.backward();
  }
  // The synchronised step: the average of every rank's own gradient.
  model->zero_grad();
  sum(ddp(x)).backward();
  expect_mean_over_ranks(weight.grad(), local, 1e-12);
}

// ---- unused parameters -------------------------------------------------------------------------

// A model with a head only some ranks use (`partly`) and one no rank uses (`never`).
class BranchyModel : public Module {
 public:
  explicit BranchyModel(bool use_partly) : use_partly(use_partly) {
    body = register_module("body", std::make_shared<Linear>(6, 3));
    partly = register_module("partly", std::make_shared<Linear>(6, 3));
    never = register_module("never", std::make_shared<Linear>(6, 3));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor out = (*body)(x);
    return use_partly ? out + (*partly)(x) : out;
  }
  std::shared_ptr<Linear> body, partly, never;
  bool use_partly;  // whether forward goes through `partly`
};

TEST(UnusedParameters, WithoutFindUnusedTheErrorNamesThem) {
  manual_seed(3);
  DistributedDataParallel ddp(std::make_shared<BranchyModel>(false));
  const Tensor x = randn({5, 6});
  test::expect_error([&] { sum(ddp(x)).backward(); }, "never.weight, never.bias");
  test::expect_error([&] { sum(ddp(x)).backward(); }, "pass find_unused_parameters(true)");
}

TEST(UnusedParameters, FindUnusedAveragesWhatWasUsedAndLeavesTheRest) {
  const int rank = group().rank();
  manual_seed(3);
  auto model = std::make_shared<BranchyModel>(/*use_partly=*/rank == 0);
  DistributedDataParallel ddp(model, DistributedDataParallelOptions().find_unused_parameters(true));
  Generator gen(20 + rank);
  sum(ddp(randn({5, 6}, {}, &gen))).backward();
  // Used by rank 0 only: the average of rank 0's gradient and the others' zeros, on every rank.
  test::expect_same_on_every_rank(model->partly->weight.grad(), "the gradient of a parameter rank 0 alone used");
  double norm = 0;
  for (double v : model->partly->weight.grad().to_vector<double>()) norm += v * v;
  EXPECT_GT(norm, 0.0);
  // Used by nobody: no gradient at all, as in PyTorch.
  EXPECT_FALSE(model->never->weight.grad().defined());
  // And a second iteration works (the reducer was reset).
  sum(ddp(randn({5, 6}, {}, &gen))).backward();
}

// A parameter this rank leaves unused sends the gradient it already holds (here: accumulated
// inside no_sync()), not zeros, as in PyTorch: the average is over every rank's accumulation.
TEST(UnusedParameters, ALocallyUnusedParameterSendsTheGradientItAlreadyHolds) {
  const int rank = group().rank();
  manual_seed(3);
  auto model = std::make_shared<BranchyModel>(/*use_partly=*/true);
  DistributedDataParallel ddp(model, DistributedDataParallelOptions().find_unused_parameters(true));
  Generator gen(30 + rank);
  {
    auto guard = ddp.no_sync();
    sum(ddp(randn({5, 6}, {}, &gen))).backward();
  }
  const auto held = gather_from_all(model->partly->weight.grad());
  // Only rank 0 uses `partly` now, on zero inputs, which add nothing to its weight's gradient.
  model->use_partly = rank == 0;
  sum(ddp(zeros({5, 6}))).backward();
  expect_mean_over_ranks(model->partly->weight.grad(), held, 1e-6);
}

// With gradients as bucket views, a parameter no rank used keeps the gradient it holds, as
// without: the bucket it lives in is all-reduced, but the gradient must not follow.
TEST(UnusedParameters, WithBucketViewsAGradientNoRankUsedKeepsItsValues) {
  const int rank = group().rank();
  manual_seed(3);
  auto model = std::make_shared<BranchyModel>(/*use_partly=*/true);
  DistributedDataParallel ddp(model,
                              DistributedDataParallelOptions().find_unused_parameters(true).gradient_as_bucket_view(true));
  Generator gen(40 + rank);
  sum(ddp(randn({5, 6}, {}, &gen))).backward();  // `partly`'s gradient is now a bucket view
  {
    auto guard = ddp.no_sync();
    sum(ddp(randn({5, 6}, {}, &gen))).backward();  // each rank adds its own: they differ now
  }
  const std::vector<double> held = model->partly->weight.grad().to_vector<double>();
  model->use_partly = false;
  sum(ddp(randn({5, 6}, {}, &gen))).backward();
  EXPECT_EQ(model->partly->weight.grad().to_vector<double>(), held);
}

// ---- construction ------------------------------------------------------------------------------

TEST(Construction, DifferentModelsOnDifferentRanksAreNamed) {
  const int rank = group().rank();
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Linear>(4, 8));
  model->push_back(std::make_shared<Linear>(8, rank == 0 ? 2 : 3));
  test::expect_error([&] { DistributedDataParallel ddp(model); },
                     "parameter \"1.weight\" (number 2) differs in shape or dtype between rank 0 and rank(s) 1");
}

TEST(Construction, ADifferentNumberOfParametersIsNamed) {
  const int rank = group().rank();
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Linear>(4, 8));
  if (rank != 0) model->push_back(std::make_shared<Linear>(8, 8));
  test::expect_error([&] { DistributedDataParallel ddp(model); },
                     "the ranks wrap different models: rank 0 has 2 parameters, rank(s) 1");
}

// Bucket caps that differ between ranks give different buckets, whose all-reduces would pair
// up wrongly in the first backward: the constructor names the first difference instead.
TEST(Construction, ADifferentNumberOfBucketsIsNamed) {
  const int rank = group().rank();
  const auto caps = rank == 0 ? DistributedDataParallelOptions()
                              : DistributedDataParallelOptions().first_bucket_cap_mb(0.001).bucket_cap_mb(0.004);
  test::expect_error([&] { DistributedDataParallel ddp(make_model("cnn"), caps); },
                     "DistributedDataParallel: the ranks built different buckets: 4 bucket(s) on rank 1 but 1 on rank 0 "
                     "(different bucket_cap_mb / first_bucket_cap_mb?); every rank must pass the same bucket caps");
}

TEST(Construction, BucketsOfDifferentSizesAreNamed) {
  const int rank = group().rank();
  // Two buckets everywhere: the last layer alone (5,160 B) on rank 0; both linear layers
  // (806 KiB) on the other ranks, whose first cap is 0.1 MiB.
  const auto caps = DistributedDataParallelOptions().first_bucket_cap_mb(rank == 0 ? 0.001 : 0.1);
  test::expect_error([&] { DistributedDataParallel ddp(make_model("cnn"), caps); },
                     "DistributedDataParallel: the ranks built different buckets: bucket 0 holds 806 KiB on rank 1 but "
                     "5,160 B on rank 0 (different bucket_cap_mb / first_bucket_cap_mb?)");
  // A parameter that differs is named first, not the buckets it changes.
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Linear>(4, rank == 0 ? 8 : 9));
  test::expect_error([&] { DistributedDataParallel ddp(model, caps); }, "parameter \"0.weight\" (number 0) differs");
}

// Equal caps written differently (MiB that round to the same bytes) are the same buckets.
TEST(Construction, TheSameBucketsPassTheCheck) {
  const int rank = group().rank();
  const auto caps = DistributedDataParallelOptions().first_bucket_cap_mb(rank == 0 ? 0.001 : 0.0010001).bucket_cap_mb(0.004);
  DistributedDataParallel ddp(make_model("cnn"), caps);
  EXPECT_EQ(ddp.buckets().size(), 4u);
}

TEST(Construction, StateDictOfTheWrapperHasTheModulePrefix) {
  DistributedDataParallel ddp(make_model("mlp"));
  const StateDict outer = ddp.state_dict();
  const StateDict inner = ddp.module().state_dict();
  ASSERT_EQ(outer.size(), inner.size());
  EXPECT_EQ(outer.front().first, "module." + inner.front().first);
  EXPECT_EQ(inner.front().first, "1.weight");
}

TEST(Construction, BucketsFollowReverseRegistrationOrderAndCaps) {
  // The CNN's 900 KB fit in the first 1 MiB bucket: one all-reduce per step.
  DistributedDataParallel whole(make_model("cnn"));
  ASSERT_EQ(whole.buckets().size(), 1u);
  EXPECT_EQ(whole.buckets()[0].names.front(), "9.bias");
  // Smaller caps: several buckets, the last parameters first, each closed once at its cap.
  const double first_cap = 0.001, cap = 0.004;  // MiB: 1048 and 4194 bytes
  DistributedDataParallel split(make_model("cnn"),
                                DistributedDataParallelOptions().first_bucket_cap_mb(first_cap).bucket_cap_mb(cap));
  const std::vector<BucketSummary> buckets = split.buckets();
  // 9.bias + 9.weight (5160 bytes) pass the first cap; 7.*, then 3.* pass the second; 0.* is
  // what is left.
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0].names, (std::vector<std::string>{"9.bias", "9.weight"}));
  EXPECT_EQ(buckets[3].names, (std::vector<std::string>{"0.bias", "0.weight"}));
  std::vector<std::string> order;
  for (const BucketSummary& b : buckets) order.insert(order.end(), b.names.begin(), b.names.end());
  std::vector<std::string> reversed;
  for (const auto& [name, p] : split.module().named_parameters()) reversed.insert(reversed.begin(), name);
  EXPECT_EQ(order, reversed);
  EXPECT_GE(buckets[0].bytes, first_cap * 1024 * 1024);
  for (size_t i = 1; i + 1 < buckets.size(); ++i) EXPECT_GE(buckets[i].bytes, cap * 1024 * 1024) << "bucket " << i;
}

// The constructor sends rank 0's buffers as well as its parameters.
TEST(Construction, RankZerosBuffersReachEveryRank) {
  const int rank = group().rank();
  manual_seed(14);
  std::shared_ptr<Module> model = make_model("resnet");
  for (const auto& [name, buffer] : model->named_buffers()) buffer.fill_(rank + 1);
  ASSERT_FALSE(check_in_sync(*model, group()).in_sync);
  DistributedDataParallel ddp(model);
  const InSyncReport report = check_in_sync(ddp.module(), group());
  EXPECT_TRUE(report.in_sync) << report.difference;
}

// After construction parameters are never sent again; buffers are, at every forward, unless
// broadcast_buffers(false).
TEST(Construction, ParametersAreNeverSentAgainBuffersOnlyWhenAsked) {
  const int rank = group().rank();
  for (const bool broadcast : {true, false}) {
    manual_seed(15);
    std::shared_ptr<Module> model = make_model("resnet");
    DistributedDataParallel ddp(model, DistributedDataParallelOptions().broadcast_buffers(broadcast));
    const Tensor weight = model->parameters().front();
    const auto buffers = model->named_buffers();
    const auto running_mean = std::find_if(buffers.begin(), buffers.end(), [](const auto& named) {
      return named.first.find("running_mean") != std::string::npos;
    });
    ASSERT_NE(running_mean, buffers.end());
    if (rank == 1) {
      NoGradGuard no_grad;
      weight.add_(ones({1}));
      running_mean->second.add_(ones({1}));
    }
    // In eval mode BatchNorm reads its running statistics and leaves them as they are.
    ddp.eval();
    {
      NoGradGuard no_grad;
      ddp(make_batch("resnet", 2, 16).x);
    }
    const auto weights = gather_from_all(weight);
    EXPECT_NE(weights[1], weights[0]) << "a parameter was sent again after construction";
    const auto means = gather_from_all(running_mean->second);
    if (broadcast) {
      EXPECT_EQ(means[1], means[0]) << "the forward did not broadcast rank 0's buffers";
    } else {
      EXPECT_NE(means[1], means[0]) << "broadcast_buffers(false), yet the buffers were sent";
    }
  }
}

// sync_buffers() makes every rank's buffers rank 0's without a forward, whatever the option
// (what a training loop calls after its last step, before evaluating or saving), and leaves the
// parameters alone.
TEST(Construction, SyncBuffersMakesEveryRanksBuffersRankZeros) {
  const int rank = group().rank();
  manual_seed(16);
  std::shared_ptr<Module> model = make_model("resnet");
  DistributedDataParallel ddp(model, DistributedDataParallelOptions().broadcast_buffers(false));
  {
    NoGradGuard no_grad;
    for (const auto& [name, buffer] : model->named_buffers()) buffer.fill_(rank + 1);
    model->parameters().front().add_(full({1}, rank));
  }
  ddp.sync_buffers();
  for (const auto& [name, buffer] : model->named_buffers()) {
    const auto copies = gather_from_all(buffer);
    for (size_t r = 0; r < copies.size(); ++r) {
      EXPECT_EQ(copies[r], std::vector<double>(copies[r].size(), 1.0)) << name << " on rank " << r;
    }
  }
  const auto weights = gather_from_all(model->parameters().front());
  EXPECT_NE(weights[1], weights[0]) << "sync_buffers sent a parameter";
}

// ---- check_in_sync -----------------------------------------------------------------------------

TEST(CheckInSync, NamesTheFirstTensorThatDiffersAndTheRanks) {
  DistributedDataParallel ddp(make_model("mlp"));
  EXPECT_TRUE(check_in_sync(ddp.module(), group()).in_sync);
  if (group().rank() == 1) {
    NoGradGuard no_grad;
    ddp.module().named_parameters()[3].second.add_(ones({1}));  // "3.bias"
  }
  const InSyncReport report = check_in_sync(ddp.module(), group());
  EXPECT_FALSE(report.in_sync);
  EXPECT_EQ(report.difference, "\"3.bias\" differs between rank 0 and rank(s) 1");
}

}  // namespace
}  // namespace lockstep
