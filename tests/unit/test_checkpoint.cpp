// Checkpoints (io/checkpoint.h) in one process: every piece of the training state round-trips
// bit for bit, training continues exactly, and every bad checkpoint is one clear sentence that
// names the file, with the previous checkpoint never damaged by a failed or killed save. The
// multi-rank resume is tests/mpi/test_resume.cpp.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "lockstep.h"
#include "temp_dir.h"
#include "test_util.h"
#include "util/fnv1a.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<double> values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

using Metadata = std::map<std::string, std::string>;

// The checkpoint at `from` written again to `to` with `edit` applied to its metadata (and
// `edit_tensors` to its tensors). The saved checksum stays as it was, unless `recompute`: then
// it is computed anew, as someone who edits a file by hand and knows the format would.
void rewrite(const std::string& from, const std::string& to, const std::function<void(Metadata&)>& edit,
             bool recompute = false, const std::function<void(StateDict&)>& edit_tensors = nullptr) {
  Metadata metadata;
  StateDict tensors = load_safetensors(from, &metadata);
  edit(metadata);
  if (edit_tensors) edit_tensors(tensors);
  if (recompute) metadata[kCheckpointChecksumKey] = checkpoint_checksum(tensors, metadata);
  save_safetensors(to, tensors, metadata);
}

// `json` (a metadata entry's text) with the value of its one `"key":` replaced by `value`.
std::string with_value(const std::string& json, const std::string& key, const std::string& value) {
  const std::string edited =
      std::regex_replace(json, std::regex("\"" + key + "\":(-?[0-9.e+-]+|true|false)"), "\"" + key + "\":" + value);
  EXPECT_NE(edited, json) << "no \"" << key << "\": to change in " << json;
  return edited;
}

// Everything a run holds, built from `seed`, so that two seeds give two different runs.
struct Trainer {
  explicit Trainer(uint64_t seed, const std::string& model_name = "mlp") {
    manual_seed(seed);
    model = make_model(model_name);
    optimizer = std::make_unique<SGD>(model->parameters(), SGDOptions(0.05 * (1 + seed % 3)).momentum(0.9));
    scaler = std::make_unique<GradScaler>(GradScalerOptions().init_scale(1024.0 * (1 + seed % 5)).growth_interval(3));
    sampler = std::make_unique<DistributedSampler>(40, 1, 0, DistributedSamplerOptions().seed(seed));
    augment = Generator(seed * 7);
  }
  // One scaled step on a batch of `model_name`'s input drawn from the default generator.
  void step(int64_t batch = 4) {
    const Tensor x = randn({batch, 1, 28, 28});
    const Tensor y = from_vector(std::vector<int64_t>(static_cast<size_t>(batch), 3), {batch});
    optimizer->zero_grad();
    scaler->scale(cross_entropy((*model)(dropout(x, 0.2, true)), y)).backward();
    scaler->step(*optimizer);
    scaler->update();
    augment.next();
  }
  TrainingState state() {
    TrainingState s;
    s.model = model.get();
    s.optimizer = optimizer.get();
    s.scaler = stateful(*scaler);
    s.sampler = sampler.get();
    s.generators = {{"augment", &augment}};
    s.batch_size = 4;
    return s;
  }
  std::shared_ptr<Module> model;
  std::unique_ptr<SGD> optimizer;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<DistributedSampler> sampler;
  Generator augment;
};

void expect_same_run(Trainer& a, Trainer& b) {
  const StateDict ma = a.model->state_dict(), mb = b.model->state_dict();
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < ma.size(); ++i) EXPECT_EQ(values(ma[i].second), values(mb[i].second)) << ma[i].first;
  const OptimizerStateDict oa = a.optimizer->state_dict(), ob = b.optimizer->state_dict();
  ASSERT_EQ(oa.state.size(), ob.state.size());
  for (size_t i = 0; i < oa.state.size(); ++i) EXPECT_EQ(values(oa.state[i].second), values(ob.state[i].second));
  EXPECT_EQ(oa.param_group, ob.param_group);
  const StateDict sa = a.scaler->state_dict(), sb = b.scaler->state_dict();
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_EQ(sa[i].second.item(), sb[i].second.item()) << sa[i].first;
  EXPECT_EQ(a.augment.get_state(), b.augment.get_state());
  EXPECT_EQ(a.sampler->seed(), b.sampler->seed());
}

// Every test works in a fresh folder of its own, removed afterwards.
class Checkpoint : public test::TempDirTest {
 protected:
  void TearDown() override { detail::set_save_before_rename_hook(nullptr); }
};

// ---- the pieces ---------------------------------------------------------------------------------

TEST(GeneratorState, RoundTripsExactly) {
  Generator a(42);
  for (int i = 0; i < 1000; ++i) a.next();
  const std::string state = a.get_state();
  Generator b(7);
  b.set_state(state);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a.next(), b.next());
    EXPECT_EQ(a.normal(), b.normal());
    EXPECT_EQ(a.below(17), b.below(17));
  }
  EXPECT_EQ(a.get_state(), b.get_state());
}

TEST(GeneratorState, ATextThatIsNoStateIsRefusedAndChangesNothing) {
  Generator g(3);
  const std::string before = g.get_state();
  expect_error([&] { g.set_state("1 2 3"); }, "Generator::set_state: expected 313 numbers");
  expect_error([&] { g.set_state(before + " x"); }, "but found 'x'");
  std::string big = before;
  big.replace(0, big.find(' '), "99999999999999999999999");
  expect_error([&] { g.set_state(big); }, "out of range");
  EXPECT_EQ(g.get_state(), before);
}

TEST(SamplerResume, SameWorldSizeContinuesEachRanksShard) {
  for (int64_t rank = 0; rank < 3; ++rank) {
    DistributedSampler full(25, 3, rank, DistributedSamplerOptions().seed(5));
    full.set_epoch(2);
    const std::vector<int64_t> all = full.indices();
    DistributedSampler resumed(25, 3, rank, DistributedSamplerOptions().seed(5));
    resumed.resume_at(2, 2 * 2 * 3);  // two steps of batch 2 on 3 ranks
    resumed.set_epoch(2);             // the usual loop's call keeps the position
    const std::vector<int64_t> rest = resumed.indices();
    EXPECT_EQ(resumed.size(), static_cast<int64_t>(rest.size()));
    EXPECT_EQ(rest, std::vector<int64_t>(all.begin() + 4, all.end()));
    resumed.set_epoch(3);  // the next epoch is whole again
    EXPECT_EQ(resumed.size(), full.num_samples());
  }
}

TEST(SamplerResume, AnotherWorldSizeCoversTheRestOfTheEpochEvenly) {
  // 2 ranks trained 3 steps of batch 2 (12 samples of 25); 3 ranks take the rest.
  DistributedSampler order(25, 1, 0, DistributedSamplerOptions().seed(9));
  order.set_epoch(1);
  const std::vector<int64_t> epoch = order.indices();
  std::multiset<int64_t> seen(epoch.begin(), epoch.begin() + 12);
  int64_t count = -1;
  for (int64_t rank = 0; rank < 3; ++rank) {
    DistributedSampler s(25, 3, rank, DistributedSamplerOptions().seed(9));
    s.resume_at(1, 12);
    const std::vector<int64_t> mine = s.indices();
    if (count >= 0) {
      EXPECT_EQ(static_cast<int64_t>(mine.size()), count) << "every rank the same number";
    }
    count = static_cast<int64_t>(mine.size());
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(count, 5);  // ceil((27 - 12) / 3)
  for (int64_t i = 0; i < 25; ++i) EXPECT_GE(seen.count(i), 1u) << "sample " << i << " is visited";
}

// ---- round trip and continuation ----------------------------------------------------------------

TEST_F(Checkpoint, RestoresEveryPieceIntoOtherObjects) {
  Trainer a(1);
  for (int i = 0; i < 3; ++i) a.step();
  a.sampler->set_epoch(2);
  TrainingState saved = a.state();
  saved.epoch = 2;
  saved.step_in_epoch = 3;
  saved.global_step = 23;
  save_checkpoint(file("ckpt.safetensors"), saved, 0, 1);
  const std::string default_state = default_generator().get_state();

  Trainer b(2);  // other weights, lr, scale, sampler seed, generators
  manual_seed(12345);
  TrainingState loaded = b.state();
  const ResumeInfo info = load_checkpoint(file("ckpt.safetensors"), loaded, Device::cpu(), 0, 1);
  expect_same_run(a, b);
  EXPECT_EQ(default_generator().get_state(), default_state);
  EXPECT_EQ(info.epoch, 2);
  EXPECT_EQ(info.step_in_epoch, 3);
  EXPECT_EQ(info.global_step, 23);
  EXPECT_EQ(info.samples_in_epoch, 12);
  EXPECT_EQ(info.sampler_seed, 1u);
  EXPECT_EQ(info.sampler_epoch, 2);
  EXPECT_TRUE(info.bit_exact);
  EXPECT_TRUE(info.notes.empty()) << info.notes.front();
  EXPECT_EQ(loaded.global_step, 23);
  EXPECT_EQ(b.sampler->epoch(), 2);
  EXPECT_EQ(b.sampler->start_position(), 12);
  // What the checkpoint restored over b's own settings, for a program to say.
  ASSERT_TRUE(info.restored_optimizer.has_value());
  EXPECT_EQ(info.restored_optimizer->optimizer, "SGD");
  EXPECT_EQ(info.restored_optimizer->param_group, a.optimizer->state_dict().param_group);
  EXPECT_EQ(std::get<double>(info.restored_optimizer->param_group.at("lr")), 0.1);
  EXPECT_FALSE(info.restored_scheduler.has_value()) << "none was saved";
  EXPECT_TRUE(info.sampler_restored);
}

TEST_F(Checkpoint, TrainingContinuesBitForBit) {
  Trainer straight(3);
  for (int i = 0; i < 6; ++i) straight.step();

  Trainer first(3);
  for (int i = 0; i < 4; ++i) first.step();
  save_checkpoint(file("ckpt.safetensors"), first.state(), 0, 1);
  Trainer resumed(4);
  TrainingState state = resumed.state();
  load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1);
  for (int i = 0; i < 2; ++i) resumed.step();
  expect_same_run(straight, resumed);
}

TEST_F(Checkpoint, TheFileIsSafetensorsWithLockstepMetadata) {
  Trainer a(1);
  a.step();
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  std::map<std::string, std::string> metadata;
  const StateDict tensors = load_safetensors(file("ckpt.safetensors"), &metadata);
  EXPECT_EQ(metadata.at("format"), "lockstep.checkpoint");
  EXPECT_EQ(metadata.at("format_version"), "2");
  EXPECT_EQ(metadata.at("world_size"), "1");
  for (const char* key : {"training", "sampler", "generators", "optimizer", "scaler", "model", "checksum"})
    EXPECT_EQ(metadata.count(key), 1u) << key;
  std::set<std::string> names;
  for (const auto& entry : tensors) names.insert(entry.first);
  EXPECT_EQ(names.count("model.1.weight"), 1u);
  EXPECT_EQ(names.count("optimizer.state.0.momentum_buffer"), 1u);
  EXPECT_EQ(names.count("scaler.scale"), 1u);
  EXPECT_NE(metadata.at("optimizer").find("\"momentum\":0.9"), std::string::npos) << metadata.at("optimizer");
}

TEST_F(Checkpoint, OnlyRankZeroWrites) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 1, 2);
  EXPECT_FALSE(fs::exists(file("ckpt.safetensors")));
}

TEST_F(Checkpoint, ADifferentWorldSizeIsAllowedAndSaid) {
  Trainer a(1);
  a.sampler->set_epoch(1);
  TrainingState saved = a.state();
  saved.epoch = 1;
  saved.step_in_epoch = 3;
  save_checkpoint(file("ckpt.safetensors"), saved, 0, 2);  // as rank 0 of 2
  Trainer b(2);
  b.sampler = std::make_unique<DistributedSampler>(40, 3, 1, DistributedSamplerOptions());
  TrainingState loaded = b.state();
  const ResumeInfo info = load_checkpoint(file("ckpt.safetensors"), loaded, Device::cpu(), 1, 3);
  EXPECT_FALSE(info.bit_exact);
  ASSERT_FALSE(info.notes.empty());
  bool said = false;
  for (const std::string& note : info.notes)
    said = said || note.find("saved with 2 ranks, resumed with 3: the data position is recomputed") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(info.samples_in_epoch, 24);  // 3 steps of 4 on 2 ranks
  EXPECT_EQ(info.step_in_epoch, 2);      // 24 / (4 * 3)
  EXPECT_EQ(b.sampler->start_position(), 24);
  EXPECT_EQ(b.sampler->seed(), 1u);
}

// An optimiser or scaler on one side only is restored nowhere and said in a note; only an
// optimiser state nobody asked for leaves the run bit-exact (nothing that trains was left out).
TEST_F(Checkpoint, AnOptimiserOrScalerOnOneSideOnlyIsANote) {
  Trainer a(1);
  save_checkpoint(file("full.safetensors"), a.state(), 0, 1);
  TrainingState bare = a.state();
  bare.optimizer = nullptr;
  bare.scaler.reset();
  save_checkpoint(file("bare.safetensors"), bare, 0, 1);

  Trainer b(2);
  TrainingState not_given = b.state();
  not_given.optimizer = nullptr;
  not_given.scaler.reset();
  ResumeInfo info = load_checkpoint(file("full.safetensors"), not_given, Device::cpu(), 0, 1);
  EXPECT_EQ(info.notes, (std::vector<std::string>{
                            "the checkpoint's optimizer state was not restored (no optimizer was given)",
                            "the checkpoint's GradScaler state was not restored (no scaler was given)"}));
  EXPECT_FALSE(info.bit_exact);
  TrainingState optimizer_not_given = b.state();
  optimizer_not_given.optimizer = nullptr;
  info = load_checkpoint(file("full.safetensors"), optimizer_not_given, Device::cpu(), 0, 1);
  EXPECT_EQ(info.notes, (std::vector<std::string>{
                            "the checkpoint's optimizer state was not restored (no optimizer was given)"}));
  EXPECT_TRUE(info.bit_exact);

  TrainingState given = b.state();
  info = load_checkpoint(file("bare.safetensors"), given, Device::cpu(), 0, 1);
  EXPECT_EQ(info.notes, (std::vector<std::string>{
                            "the checkpoint holds no optimizer state: the optimizer starts afresh",
                            "the checkpoint holds no GradScaler state (saved without AMP): the scaler keeps its "
                            "current scale"}));
  EXPECT_FALSE(info.bit_exact);

  GradScaler disabled(GradScalerOptions().enabled(false));
  TrainingState disabled_scaler = b.state();
  disabled_scaler.scaler = stateful(disabled);
  info = load_checkpoint(file("full.safetensors"), disabled_scaler, Device::cpu(), 0, 1);
  EXPECT_EQ(info.notes, (std::vector<std::string>{
                            "the GradScaler is disabled: the checkpoint's scaler state was not restored"}));
  EXPECT_FALSE(info.bit_exact);
}

TEST_F(Checkpoint, AnotherBatchSizeKeepsThePositionInSamples) {
  Trainer a(1);
  TrainingState saved = a.state();
  saved.step_in_epoch = 3;
  save_checkpoint(file("ckpt.safetensors"), saved, 0, 1);
  Trainer b(2);
  TrainingState loaded = b.state();
  loaded.batch_size = 6;
  const ResumeInfo info = load_checkpoint(file("ckpt.safetensors"), loaded, Device::cpu(), 0, 1);
  EXPECT_EQ(info.notes, (std::vector<std::string>{
                            "saved with a batch size of 4 per rank, resumed with 6: the data position is kept in "
                            "samples (12 of epoch 0)"}));
  EXPECT_FALSE(info.bit_exact);
  EXPECT_EQ(info.step_in_epoch, 2);  // 12 / 6
  EXPECT_EQ(loaded.step_in_epoch, 2);
}

TEST_F(Checkpoint, MapLocationKeepsTheValues) {
  Trainer a(1);
  a.step();
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  Trainer b(2);
  TrainingState state = b.state();
  load_checkpoint(file("ckpt.safetensors"), state, Device::parse("cpu"), 0, 1);
  expect_same_run(a, b);
  for (const Tensor& p : b.model->parameters()) EXPECT_EQ(p.device(), Device::cpu());
}

// ---- bad checkpoints ----------------------------------------------------------------------------

TEST_F(Checkpoint, ATruncatedFileIsNamed) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  const std::string bytes = read_bytes(file("ckpt.safetensors"));
  write_bytes(file("cut.safetensors"), bytes.substr(0, bytes.size() / 2));
  Trainer b(2);
  TrainingState state = b.state();
  const std::vector<double> before = values(b.model->parameters().front());
  expect_error([&] { load_checkpoint(file("cut.safetensors"), state, Device::cpu(), 0, 1); },
               "load_checkpoint: load_safetensors: '" + file("cut.safetensors") + "'");
  EXPECT_EQ(values(b.model->parameters().front()), before) << "nothing changed";
  write_bytes(file("tiny.safetensors"), bytes.substr(0, 5));
  expect_error([&] { load_checkpoint(file("tiny.safetensors"), state, Device::cpu(), 0, 1); }, "too short");
  expect_error([&] { load_checkpoint(file("none.safetensors"), state, Device::cpu(), 0, 1); }, "cannot open the file");
}

TEST_F(Checkpoint, DamagedDataFailsTheChecksum) {
  Trainer a(1);
  a.step();
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  std::string bytes = read_bytes(file("ckpt.safetensors"));
  bytes[bytes.size() - 8] ^= 1;  // the lowest bit of an element: still a finite number
  write_bytes(file("ckpt.safetensors"), bytes);
  Trainer b(2);
  TrainingState state = b.state();
  expect_error([&] { load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1); },
               "'" + file("ckpt.safetensors") + "': the file was changed after it was written: its tensors or "
               "metadata do not match the checksum saved with it");
}

TEST_F(Checkpoint, AnotherModelIsNamed) {
  Trainer mlp(1);
  save_checkpoint(file("mlp.safetensors"), mlp.state(), 0, 1);
  Trainer cnn(2, "cnn");
  TrainingState state = cnn.state();
  expect_error([&] { load_checkpoint(file("mlp.safetensors"), state, Device::cpu(), 0, 1); },
               "'" + file("mlp.safetensors") + "': holds another model: this model has '");

  // Same names, another shape.
  auto small = std::make_shared<Sequential>(std::make_shared<Linear>(4, 3));
  auto wide = std::make_shared<Sequential>(std::make_shared<Linear>(5, 3));
  TrainingState s1;
  s1.model = small.get();
  save_checkpoint(file("small.safetensors"), s1, 0, 1);
  TrainingState s2;
  s2.model = wide.get();
  expect_error([&] { load_checkpoint(file("small.safetensors"), s2, Device::cpu(), 0, 1); },
               "holds another model: its '0.weight' has shape [3, 4], this model's has [3, 5]");
}

// A wrapper whose state_dict names start with "module.", as DDP's does.
struct Wrapper : Module {
  explicit Wrapper(std::shared_ptr<Module> inner) { register_module("module", std::move(inner)); }
  Tensor forward(const Tensor& x) override { return x; }
};

TEST_F(Checkpoint, AWrappersModulePrefixIsExplained) {
  auto inner = std::make_shared<Sequential>(std::make_shared<Linear>(4, 3));
  Wrapper wrapped(inner);
  TrainingState s1;
  s1.model = &wrapped;
  save_checkpoint(file("wrapped.safetensors"), s1, 0, 1);
  auto plain = std::make_shared<Sequential>(std::make_shared<Linear>(4, 3));
  TrainingState s2;
  s2.model = plain.get();
  expect_error([&] { load_checkpoint(file("wrapped.safetensors"), s2, Device::cpu(), 0, 1); },
               "save and load the inner module (ddp->module())");
}

TEST_F(Checkpoint, AnotherOptimiserIsNamedAndNothingChanges) {
  Trainer a(1);
  a.step();
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  Trainer b(2);
  b.step();
  Adam adam(b.model->parameters());
  TrainingState state = b.state();
  state.optimizer = &adam;
  const std::vector<double> before = values(b.model->parameters().front());
  const double scale = b.scaler->get_scale();
  expect_error([&] { load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1); },
               "'" + file("ckpt.safetensors") + "': load_state_dict: the checkpoint's optimizer is SGD, this one is Adam");
  EXPECT_EQ(values(b.model->parameters().front()), before);
  EXPECT_EQ(b.scaler->get_scale(), scale) << "the scaler was put back";
}

TEST_F(Checkpoint, ANonLockstepSafetensorsFileIsNamed) {
  save_safetensors(file("plain.safetensors"), make_model("mlp")->state_dict());
  Trainer b(2);
  TrainingState state = b.state();
  expect_error([&] { load_checkpoint(file("plain.safetensors"), state, Device::cpu(), 0, 1); },
               "is a safetensors file but not a Lockstep checkpoint");
}

TEST_F(Checkpoint, ANewerFormatVersionIsRefused) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  std::map<std::string, std::string> metadata;
  const StateDict tensors = load_safetensors(file("ckpt.safetensors"), &metadata);
  metadata["format_version"] = "3";
  save_safetensors(file("v3.safetensors"), tensors, metadata);
  Trainer b(2);
  TrainingState state = b.state();
  expect_error([&] { load_checkpoint(file("v3.safetensors"), state, Device::cpu(), 0, 1); },
               "was written by a newer Lockstep (checkpoint format version 3; this build reads up to version 2)");
}

// Version 1's checksum covered the tensors alone, so its metadata may have been edited unseen.
TEST_F(Checkpoint, AVersionOneFileIsRefusedWithWhatToDo) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  rewrite(file("ckpt.safetensors"), file("v1.safetensors"), [](Metadata& m) { m["format_version"] = "1"; });
  Trainer b(2);
  TrainingState state = b.state();
  EXPECT_EQ(test::error_message([&] { load_checkpoint(file("v1.safetensors"), state, Device::cpu(), 0, 1); }),
            "load_checkpoint: '" + file("v1.safetensors") +
                "': was written by an older Lockstep (checkpoint format version 1), whose checksum does not cover "
                "the metadata, so an edited learning rate, position or random state would load unnoticed; train "
                "again with this version, whose checkpoints (format version 2) it covers");
}

TEST_F(Checkpoint, AMissingNamedGeneratorIsNamed) {
  Trainer a(1);
  TrainingState saved = a.state();
  saved.generators.clear();
  save_checkpoint(file("ckpt.safetensors"), saved, 0, 1);
  Trainer b(2);
  TrainingState state = b.state();
  expect_error([&] { load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1); },
               "the checkpoint holds no state for generator 'augment'");
}

TEST_F(Checkpoint, ASamplerOverAnotherDatasetIsRefused) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  Trainer b(2);
  b.sampler = std::make_unique<DistributedSampler>(50, 1, 0);
  TrainingState state = b.state();
  expect_error([&] { load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1); },
               "was saved for a dataset of 40 samples and this sampler covers 50");
}

// ---- metadata that cannot be edited silently ---------------------------------------------------

// The checksum's layout, as io/checkpoint.h documents it (and read_checkpoint.py computes it):
// each field preceded by its length as 8 bytes, least significant first.
TEST(CheckpointChecksum, IsTheDocumentedHashOfTensorsThenMetadata) {
  const auto field = [](const std::string& bytes, uint64_t hash) {
    std::string length(8, '\0');
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(bytes.size() >> (8 * i));
    return fnv1a(bytes.data(), bytes.size(), fnv1a(length.data(), 8, hash));
  };
  const float one = 1.0f;
  uint64_t hash = kFnv1aOffsetBasis;
  for (const char* text : {"t", "f32", "[1]"}) hash = field(text, hash);
  hash = field(std::string(reinterpret_cast<const char*>(&one), 4), hash);
  for (const char* text : {"a", "b", "c", "d"}) hash = field(text, hash);
  char expected[32];
  std::snprintf(expected, sizeof expected, "fnv1a64:%016llx", static_cast<unsigned long long>(hash));
  const StateDict tensors = {{"t", full({1}, 1.0)}};
  EXPECT_EQ(checkpoint_checksum(tensors, {{"c", "d"}, {"checksum", "left out"}, {"a", "b"}}), expected);
}

// Every value a resume depends on, edited in the file with the old checksum kept, is refused:
// each would otherwise resume "bit-exact" into another run.
TEST_F(Checkpoint, AnEditedMetadataValueFailsTheChecksum) {
  Trainer a(1);
  a.step();
  LinearLR warmup(*a.optimizer, 0.25, 1.0, 10);
  warmup.step();
  a.sampler->set_epoch(1);
  TrainingState saved = a.state();
  saved.scheduler = &warmup;
  saved.epoch = 1;
  saved.step_in_epoch = 2;
  saved.global_step = 7;
  save_checkpoint(file("ckpt.safetensors"), saved, 0, 1);

  struct Edit {
    std::string entry, key, value;
  };
  const std::vector<Edit> edits = {
      {"training", "global_step", "8"},       {"training", "global_step", "-1"},
      {"training", "epoch", "0"},             {"training", "step_in_epoch", "1"},
      {"training", "samples_in_epoch", "4"},  {"training", "batch_size", "2"},
      {"optimizer", "lr", "0.5"},             {"optimizer", "momentum", "0.5"},
      {"optimizer", "dampening", "0.5"},      {"optimizer", "weight_decay", "0.01"},
      {"optimizer", "nesterov", "true"},      {"scheduler", "last_epoch", "5"},
      {"scheduler", "base_lr", "0.2"},        {"scheduler", "start_factor", "0.5"},
      {"scheduler", "total_iters", "20"},     {"sampler", "seed", "2"},
      {"sampler", "epoch", "0"},              {"scaler", "scale", "2.0"},
  };
  Trainer b(2);
  LinearLR b_warmup(*b.optimizer, 0.25, 1.0, 10);
  TrainingState state = b.state();
  state.scheduler = &b_warmup;
  const std::vector<double> before = values(b.model->parameters().front());
  const auto expect_refused = [&](const std::string& what) {
    SCOPED_TRACE(what);
    expect_error([&] { load_checkpoint(file("edited.safetensors"), state, Device::cpu(), 0, 1); },
                 "'" + file("edited.safetensors") + "': the file was changed after it was written");
  };
  for (const Edit& edit : edits) {
    rewrite(file("ckpt.safetensors"), file("edited.safetensors"),
            [&](Metadata& m) { m[edit.entry] = with_value(m[edit.entry], edit.key, edit.value); });
    expect_refused(edit.entry + "." + edit.key + " = " + edit.value);
  }
  rewrite(file("ckpt.safetensors"), file("edited.safetensors"), [](Metadata& m) { m["world_size"] = "2"; });
  expect_refused("world_size = 2");
  for (const char* generator : {"\"default\":[\"", "\"augment\":\""}) {
    rewrite(file("ckpt.safetensors"), file("edited.safetensors"), [&](Metadata& m) {
      std::string& text = m["generators"];
      const size_t digit = text.find(generator) + std::string(generator).size();
      text[digit] = text[digit] == '1' ? '2' : '1';
    });
    expect_refused(std::string("the state of generator ") + generator);
  }
  // A tensor's name counts too: the data alone is not the file.
  rewrite(file("ckpt.safetensors"), file("edited.safetensors"), [](Metadata&) {}, false, [](StateDict& tensors) {
    for (auto& [name, t] : tensors)
      if (name == "optimizer.state.0.momentum_buffer") name = "optimizer.state.0.momentum_buffer_";
  });
  expect_refused("a renamed tensor");
  EXPECT_EQ(values(b.model->parameters().front()), before) << "nothing changed";
  EXPECT_EQ(b_warmup.last_epoch(), 0);
  EXPECT_NO_THROW(load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1)) << "the file itself loads";
  EXPECT_EQ(b_warmup.last_epoch(), 1);
}

// A file whose checksum was computed anew over impossible values (by hand, or by a fuzzer) is
// refused by the checks of each value, naming the field and the file, and changes nothing.
TEST_F(Checkpoint, AnImpossibleValueUnderAValidChecksumIsNamed) {
  Trainer a(1);
  a.step();
  TrainingState saved = a.state();
  saved.step_in_epoch = 2;
  save_checkpoint(file("ckpt.safetensors"), saved, 0, 1);
  Trainer b(2);
  TrainingState state = b.state();
  const std::vector<double> before = values(b.model->parameters().front());
  const double lr = b.optimizer->lr();
  const std::string forged = file("forged.safetensors");
  const auto refused = [&](const std::string& entry, const std::string& key, const std::string& value,
                           const std::string& words) {
    SCOPED_TRACE(entry + "." + key + " = " + value);
    rewrite(file("ckpt.safetensors"), forged, [&](Metadata& m) { m[entry] = with_value(m[entry], key, value); },
            /*recompute=*/true);
    expect_error([&] { load_checkpoint(forged, state, Device::cpu(), 0, 1); },
                 "load_checkpoint: '" + forged + "': " + words);
  };
  for (const char* key : {"epoch", "global_step", "batch_size", "samples_in_epoch", "step_in_epoch"})
    refused("training", key, "-1",
            std::string("the checkpoint's \"training\" metadata has ") + key +
                " -1; expected a whole number of 0 or more (the file is damaged)");
  refused("training", "global_step", "18446744073709551615",
          "the checkpoint's \"training\" metadata has global_step 18446744073709551615; expected a whole number "
          "of 0 or more");
  refused("training", "samples_in_epoch", "5",
          "the checkpoint's \"training\" metadata has samples_in_epoch 5, which is not step_in_epoch x batch_size x "
          "world_size (2 x 4 x 1); the file is damaged");
  refused("optimizer", "lr", "-1", "SGD.load_state_dict: expected a learning rate >= 0, got -1");
  refused("optimizer", "lr", "1e999", "the checkpoint's metadata \"optimizer\" is not valid JSON (");
  refused("optimizer", "momentum", "-0.5", "SGD.load_state_dict: expected a momentum >= 0, got -0.5");
  refused("optimizer", "weight_decay", "-1", "SGD.load_state_dict: expected a weight_decay >= 0, got -1");
  refused("sampler", "epoch", "-1",
          "the checkpoint's \"sampler\" metadata has epoch -1; expected a whole number of 0 or more");
  refused("sampler", "seed", "-1", "the checkpoint's \"sampler\" metadata has no whole number \"seed\" of 0 or more");

  rewrite(file("ckpt.safetensors"), forged, [](Metadata& m) { m["world_size"] = "0"; }, true);
  expect_error([&] { load_checkpoint(forged, state, Device::cpu(), 0, 1); },
               "the checkpoint's \"world_size\" is 0; expected a number of ranks from 1 to 2147483647");
  rewrite(file("ckpt.safetensors"), forged, [](Metadata& m) { m["model"] = "[[\"1.weight\",\"f32\",[\"x\"]]]"; },
          true);
  expect_error([&] { load_checkpoint(forged, state, Device::cpu(), 0, 1); },
               "the checkpoint's \"model\" metadata has a malformed entry; the file is damaged");
  // The fingerprint agrees with this model, but the file's tensor has another shape.
  rewrite(file("ckpt.safetensors"), forged, [](Metadata&) {}, true, [](StateDict& tensors) {
    for (auto& [name, t] : tensors)
      if (name == "model.1.bias") t = zeros({t.numel() + 1});
  });
  expect_error([&] { load_checkpoint(forged, state, Device::cpu(), 0, 1); },
               "its \"model.\" tensors are not those its \"model\" metadata lists (names, dtypes and shapes)");

  EXPECT_EQ(values(b.model->parameters().front()), before) << "nothing changed";
  EXPECT_EQ(b.optimizer->lr(), lr);
  EXPECT_EQ(b.sampler->start_position(), 0);
}

// ---- crash safety -------------------------------------------------------------------------------

TEST_F(Checkpoint, ALeftoverTemporaryIsIgnoredAndRefused) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  write_bytes(file("ckpt.safetensors.tmp"), "half a checkpoint");
  Trainer b(2);
  TrainingState state = b.state();
  EXPECT_NO_THROW(load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1));
  expect_error([&] { load_checkpoint(file("ckpt.safetensors.tmp"), state, Device::cpu(), 0, 1); },
               "is the temporary file of a save that did not finish (a completed save renames it to '" +
                   file("ckpt.safetensors") + "'); load that file instead");
  a.step();
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);  // a later save still works
  EXPECT_FALSE(fs::exists(file("ckpt.safetensors.tmp")));
  EXPECT_NO_THROW(load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1));
  expect_same_run(a, b);
}

TEST_F(Checkpoint, ASaveThatFailsHalfWayLeavesTheOldFileIntact) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  const std::string old_bytes = read_bytes(file("ckpt.safetensors"));
  a.step();
  detail::set_save_before_rename_hook([](const std::string&) { throw Error("the disk filled up"); });
  expect_error([&] { save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1); }, "the disk filled up");
  detail::set_save_before_rename_hook(nullptr);
  EXPECT_EQ(read_bytes(file("ckpt.safetensors")), old_bytes);
  EXPECT_FALSE(fs::exists(file("ckpt.safetensors.tmp"))) << "a failed save cleans up";

  // A folder that does not exist (or cannot be written): the old file elsewhere is untouched.
  expect_error([&] { save_checkpoint(file("gone/ckpt.safetensors"), a.state(), 0, 1); }, "cannot create");
}

TEST_F(Checkpoint, ASaveKilledBetweenWriteAndRenameLeavesTheOldFileIntact) {
  Trainer a(1);
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  const std::string old_bytes = read_bytes(file("ckpt.safetensors"));
  a.step();
  // The child process is killed (it exits at once, running no destructor) after the temporary
  // file is written and before the rename.
  EXPECT_EXIT(
      {
        detail::set_save_before_rename_hook([](const std::string&) { _exit(3); });
        save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
      },
      testing::ExitedWithCode(3), "");
  EXPECT_EQ(read_bytes(file("ckpt.safetensors")), old_bytes);
  ASSERT_TRUE(fs::exists(file("ckpt.safetensors.tmp"))) << "the killed save left its temporary";
  Trainer b(2);
  TrainingState state = b.state();
  EXPECT_NO_THROW(load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1));
  expect_error([&] { load_checkpoint(file("ckpt.safetensors.tmp"), state, Device::cpu(), 0, 1); },
               "is the temporary file of a save that did not finish");
  save_checkpoint(file("ckpt.safetensors"), a.state(), 0, 1);
  EXPECT_FALSE(fs::exists(file("ckpt.safetensors.tmp")));
  load_checkpoint(file("ckpt.safetensors"), state, Device::cpu(), 0, 1);
  expect_same_run(a, b);
}

// ---- for tests/reference/read_checkpoint.py ----------------------------------------------------

// Writes a checkpoint (MLP, SGD with momentum, GradScaler, sampler, a named generator) to the
// path in $LOCKSTEP_CHECKPOINT_SAMPLE, for the Python reader to open; skipped without it.
TEST(CheckpointSample, WritesTheFileNamedByTheEnvironment) {
  const char* path = std::getenv("LOCKSTEP_CHECKPOINT_SAMPLE");
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "set LOCKSTEP_CHECKPOINT_SAMPLE to write a sample checkpoint";
  Trainer a(1);
  for (int i = 0; i < 2; ++i) a.step();
  TrainingState state = a.state();
  state.epoch = 1;
  state.step_in_epoch = 2;
  state.global_step = 7;
  save_checkpoint(path, state, 0, 1);
  Trainer b(2);
  TrainingState loaded = b.state();
  EXPECT_EQ(load_checkpoint(path, loaded, Device::cpu(), 0, 1).global_step, 7);
}

}  // namespace
}  // namespace lockstep
