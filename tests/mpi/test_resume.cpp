// Checkpoint and resume under mpirun (io/checkpoint.h): K + M steps in one run must equal K
// steps, a save by rank 0, a fresh start from other values, a load on every rank and M more
// steps, bit for bit — every parameter, buffer, optimiser state tensor, the GradScaler and each
// rank's random generator — with SGD + momentum, with Adam, and with AMP (bf16 autocast on the
// CPU + GradScaler). The data come from a DistributedSampler + DataLoader, and K stops in the
// middle of an epoch, so the sampler's position matters too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "io/checkpoint.h"
#include "mpi_test_util.h"

namespace lockstep {
namespace {

using test::group;

constexpr int64_t kSamples = 40;    // per epoch: 5 steps of 4 x 2 ranks, 4 steps of 4 x 3 ranks
constexpr int64_t kBatch = 4;       // per rank
constexpr int64_t kFirstSteps = 7;  // K: stops inside the second epoch
constexpr int64_t kMoreSteps = 6;   // M: crosses into the third

enum class Kind { sgd, adam, amp };

std::string kind_name(const testing::TestParamInfo<Kind>& info) {
  return info.param == Kind::sgd ? "SgdMomentum" : info.param == Kind::adam ? "Adam" : "AmpBf16GradScaler";
}

// The synthetic dataset: the same on every rank.
std::shared_ptr<TensorDataset> dataset() {
  Generator g(5);
  std::vector<int64_t> labels(kSamples);
  for (int64_t& label : labels) label = static_cast<int64_t>(g.below(10));
  return std::make_shared<TensorDataset>(randn({kSamples, 1, 28, 28}, {}, &g), from_vector(labels, {kSamples}));
}

// One rank's training run, built from `seed`: another seed gives other weights, another
// learning rate, scale, sampler seed and random numbers, which a load must all replace.
struct Training {
  Training(Kind kind, uint64_t seed) : kind(kind) {
    const int rank = group().rank(), world = group().size();
    manual_seed(seed * 100 + static_cast<uint64_t>(rank));  // other weights on every rank
    model = make_model(kind == Kind::adam ? "cnn" : "mlp");
    if (kind == Kind::adam)
      optimizer = std::make_unique<Adam>(model->parameters(), AdamOptions(1e-3 * static_cast<double>(seed)));
    else
      optimizer = std::make_unique<SGD>(model->parameters(),
                                        SGDOptions(0.02 * static_cast<double>(seed)).momentum(0.9).weight_decay(1e-4));
    // A short growth interval, so the scale changes within the run.
    scaler = std::make_unique<GradScaler>(
        GradScalerOptions().init_scale(256.0 * static_cast<double>(seed)).growth_interval(2).enabled(kind == Kind::amp));
    sampler = std::make_shared<DistributedSampler>(kSamples, world, rank, DistributedSamplerOptions().seed(seed));
    loader = std::make_unique<DataLoader>(dataset(), DataLoaderOptions(kBatch).sampler(sampler));
    // Each rank draws its own dropout masks: the generators differ between ranks.
    manual_seed(seed * 1000 + static_cast<uint64_t>(rank));
  }

  // Wraps the model (after any load, as PyTorch's recipe does; DDP then broadcasts rank 0's
  // weights, which every rank already holds).
  void wrap() { ddp = std::make_shared<DistributedDataParallel>(model); }

  // Trains until `global_step` reaches `until`, from the position in `position`.
  void train_until(int64_t until) {
    while (position.global_step < until) {
      sampler->set_epoch(position.epoch);
      for (const Batch& batch : *loader) {
        step(batch);
        ++position.step_in_epoch;
        if (++position.global_step == until) return;
      }
      ++position.epoch;
      position.step_in_epoch = 0;
    }
  }

  void step(const Batch& batch) {
    optimizer->zero_grad();
    const Tensor x = dropout(batch.inputs, 0.1, true);  // draws from this rank's default generator
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, DType::bf16, kind == Kind::amp);
      loss = cross_entropy((*ddp)(x), batch.targets);
    }
    scaler->scale(loss).backward();
    scaler->step(*optimizer);
    scaler->update();
  }

  TrainingState state() {
    TrainingState s;
    s.model = model.get();
    s.optimizer = optimizer.get();
    s.scaler = stateful(*scaler);
    s.sampler = sampler.get();
    s.epoch = position.epoch;
    s.step_in_epoch = position.step_in_epoch;
    s.global_step = position.global_step;
    s.batch_size = kBatch;
    return s;
  }

  Kind kind;
  std::shared_ptr<Module> model;
  std::shared_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<GradScaler> scaler;
  std::shared_ptr<DistributedSampler> sampler;
  std::unique_ptr<DataLoader> loader;
  struct {
    int64_t epoch = 0, step_in_epoch = 0, global_step = 0;
  } position;
};

// Everything that must match bitwise, as bytes.
std::vector<std::pair<std::string, std::string>> snapshot(Training& t) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto bytes = [](const Tensor& tensor) {
    const Tensor c = tensor.detach().contiguous().to(Device::cpu());
    return std::string(static_cast<const char*>(c.data()), static_cast<size_t>(c.nbytes()));
  };
  for (const auto& [name, tensor] : t.model->state_dict()) out.emplace_back("model." + name, bytes(tensor));
  for (const auto& [name, tensor] : t.optimizer->state_dict().state) out.emplace_back("optimizer." + name, bytes(tensor));
  for (const auto& [name, tensor] : t.scaler->state_dict()) out.emplace_back("scaler." + name, bytes(tensor));
  out.emplace_back("lr", std::to_string(t.optimizer->lr()));
  out.emplace_back("default generator", default_generator().get_state());
  out.emplace_back("position", std::to_string(t.position.epoch) + "/" + std::to_string(t.position.step_in_epoch));
  return out;
}

// A checkpoint path every rank agrees on: rank 0's process id, broadcast.
std::string shared_path(const std::string& name) {
  const Tensor id = full({1}, static_cast<double>(::getpid()), TensorOptions().dtype(DType::i64));
  group().broadcast(id, 0);
  return (std::filesystem::temp_directory_path() /
          ("lockstep_resume_" + std::to_string(id.item<int64_t>()) + "_" + name + ".safetensors"))
      .string();
}

class Resume : public testing::TestWithParam<Kind> {};

TEST_P(Resume, KPlusMStepsEqualKStepsSaveLoadAndMSteps) {
  const Kind kind = GetParam();
  const int rank = group().rank(), world = group().size();

  // K + M steps in one run.
  Training straight(kind, 1);
  straight.wrap();
  straight.train_until(kFirstSteps + kMoreSteps);
  const auto expected = snapshot(straight);

  // K steps, then rank 0 saves; every rank's generator state goes into the file.
  const std::string path = shared_path(kind_name(testing::TestParamInfo<Kind>(kind, 0)));
  {
    Training first(kind, 1);
    first.wrap();
    first.train_until(kFirstSteps);
    ASSERT_GT(first.position.step_in_epoch, 0) << "K should stop inside an epoch";
    TrainingState state = first.state();
    state.default_generator_states = all_gather_generator_states(group());
    save_checkpoint(path, state, rank, world);
    group().barrier();  // the file is complete before anyone reads it
  }

  // A fresh start from other values everywhere, then the load on every rank, then M steps.
  Training resumed(kind, 2);
  TrainingState state = resumed.state();
  const ResumeInfo info = load_checkpoint(path, state, Device::cpu(), rank, world);
  EXPECT_TRUE(info.bit_exact);
  for (const std::string& note : info.notes) ADD_FAILURE() << "unexpected note: " << note;
  EXPECT_EQ(info.global_step, kFirstSteps);
  EXPECT_EQ(info.saved_world_size, world);
  resumed.position.epoch = info.epoch;
  resumed.position.step_in_epoch = info.step_in_epoch;
  resumed.position.global_step = info.global_step;
  resumed.wrap();
  resumed.train_until(kFirstSteps + kMoreSteps);
  const auto got = snapshot(resumed);

  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, expected[i].first);
    EXPECT_TRUE(got[i].second == expected[i].second) << "rank " << rank << ": " << got[i].first << " differs";
  }
  for (const auto& [name, p] : resumed.model->named_parameters()) test::expect_same_on_every_rank(p, name);
  if (kind == Kind::amp) {
    EXPECT_NE(resumed.scaler->get_scale(), 256.0) << "the scale moved during the run";
  }

  group().barrier();
  if (rank == 0) std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Optimisers, Resume, testing::Values(Kind::sgd, Kind::adam, Kind::amp), kind_name);

// A checkpoint saved without gathering the generators holds rank 0's state only: every rank
// gets it back, and the loader says so (ranks that drew different numbers before now draw the
// same ones).
TEST(ResumeGenerators, WithoutGatheringEveryRankGetsRankZerosState) {
  const int rank = group().rank(), world = group().size();
  Training t(Kind::sgd, 3);
  t.wrap();
  t.train_until(2);
  const std::string rank0_state = [&] {
    const std::string mine = default_generator().get_state();
    std::vector<std::string> all = all_gather_generator_states(group());
    EXPECT_EQ(all[static_cast<size_t>(rank)], mine);
    return all[0];
  }();
  const std::string path = shared_path("ungathered");
  save_checkpoint(path, t.state(), rank, world);
  group().barrier();
  Training other(Kind::sgd, 4);
  TrainingState state = other.state();
  const ResumeInfo info = load_checkpoint(path, state, Device::cpu(), rank, world);
  EXPECT_EQ(default_generator().get_state(), rank0_state);
  ASSERT_FALSE(info.notes.empty());
  EXPECT_NE(info.notes.front().find("one default generator state was saved (rank 0's)"), std::string::npos);
  group().barrier();
  if (rank == 0) std::remove(path.c_str());
}

}  // namespace
}  // namespace lockstep
