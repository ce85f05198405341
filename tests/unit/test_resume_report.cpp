// resume_report (chapters/common/resume_report.h): a flag given with --resume whose value the
// checkpoint replaces is said in one sentence, naming the value used and why; a flag that agrees,
// was not given, or whose setting the checkpoint did not restore says nothing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/resume_report.h"
#include "io/checkpoint.h"
#include "lockstep.h"
#include "temp_dir.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using Sentences = std::vector<std::string>;

// What load_checkpoint returns after restoring SGD(lr 0.1, momentum 0.9) and a sampler of seed 5.
ResumeInfo sgd_resume() {
  ResumeInfo info;
  info.restored_optimizer = OptimizerSettings{
      "SGD", {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.0}, {"weight_decay", 0.0}, {"nesterov", false}}};
  info.sampler_seed = 5;
  info.sampler_restored = true;
  return info;
}

// The same with a LinearLR warm-up to 0.4 from a quarter of it over 100 steps, a third of the way.
ResumeInfo warmup_resume() {
  ResumeInfo info = sgd_resume();
  info.restored_optimizer->param_group["lr"] = 0.2;
  info.restored_scheduler =
      LRSchedulerStateDict{"LinearLR", 33, 0.4, {{"start_factor", 0.25}, {"end_factor", 1.0}, {"total_iters", 100.0}}};
  return info;
}

TEST(ResumeReport, FlagsThatAgreeOrWereNotGivenSayNothing) {
  ResumeFlags agree;
  agree.lr = 0.1;
  agree.momentum = 0.9;
  agree.seed = 5;
  EXPECT_EQ(resume_report(sgd_resume(), agree), Sentences{});
  EXPECT_EQ(resume_report(sgd_resume(), ResumeFlags{}), Sentences{}) << "defaults asked for nothing";
}

TEST(ResumeReport, EachOverriddenFlagIsOneSentenceInPyTorchsTerms) {
  ResumeFlags flags;
  flags.lr = 0.2;
  flags.momentum = 0.5;
  flags.seed = 7;
  EXPECT_EQ(resume_report(sgd_resume(), flags),
            (Sentences{"--lr 0.2 differs from the checkpoint's 0.1: the checkpoint's is used (the optimiser's "
                       "state_dict restores its learning rate, as optimizer.load_state_dict does); start a new run "
                       "to train with another rate",
                       "--momentum 0.5 differs from the checkpoint's 0.9: the checkpoint's is used (the optimiser's "
                       "state_dict restores its momentum, as optimizer.load_state_dict does, and its momentum buffers "
                       "with it); start a new run to train with another momentum",
                       "--seed 7 differs from the checkpoint's 5: the checkpoint's is used (the sampler resumes the "
                       "saved run's shuffle, which its seed fixes, so that the rest of the epoch neither repeats nor "
                       "skips a sample, and the random generators go on from their saved states, as "
                       "torch.set_rng_state does); start a new run to train from another seed"}));
}

TEST(ResumeReport, NumbersThatDifferNeverPrintAlike) {
  ResumeFlags flags;
  flags.lr = std::nextafter(0.1, 1.0);
  const Sentences said = resume_report(sgd_resume(), flags);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].substr(0, 60), "--lr 0.10000000000000002 differs from the checkpoint's 0.1: ");
}

// With a warm-up, --lr is the rate it climbs to: the optimiser's rate of the moment (0.2) is
// no reason to speak.
TEST(ResumeReport, WithAWarmUpTheRateAndLengthAreTheSchedulers) {
  ResumeFlags same;
  same.lr = 0.4;
  same.warmup_epochs = 1;
  same.warmup_steps = 100;
  same.warmup_start_factor = 0.25;
  EXPECT_EQ(resume_report(warmup_resume(), same), Sentences{});

  ResumeFlags other;
  other.lr = 0.8;
  other.warmup_epochs = 2;
  other.warmup_steps = 200;
  other.warmup_start_factor = 0.5;
  EXPECT_EQ(resume_report(warmup_resume(), other),
            (Sentences{"--lr 0.8 differs from the checkpoint's 0.4: the checkpoint's is used (the scheduler's "
                       "state_dict restores its base_lr, the rate the warm-up climbs to, as scheduler.load_state_dict "
                       "does, and the optimiser's the rate it had reached); start a new run to train with another rate",
                       "--warmup-epochs 2 comes to 200 optimiser steps in this run, and the checkpoint's warm-up takes "
                       "100: the checkpoint's is used (the scheduler's state_dict restores its total_iters, as "
                       "scheduler.load_state_dict does); start a new run to warm up over another length",
                       "--warmup-start-factor 0.5 differs from the checkpoint's 0.25: the checkpoint's is used (the "
                       "scheduler's state_dict restores its start_factor, as scheduler.load_state_dict does); start "
                       "a new run to warm up from another rate"}));
}

// What was not restored is not overridden: the flag's value is in force (load_checkpoint's
// notes say what was not restored).
TEST(ResumeReport, SettingsTheCheckpointDidNotRestoreAreNotCompared) {
  ResumeFlags flags;
  flags.lr = 0.2;
  flags.momentum = 0.5;
  flags.seed = 7;
  flags.warmup_epochs = 2;
  flags.warmup_steps = 200;
  flags.warmup_start_factor = 0.5;
  ResumeInfo nothing_restored;
  nothing_restored.sampler_seed = 5;  // saved, but no sampler was given to restore it into
  EXPECT_EQ(resume_report(nothing_restored, flags), Sentences{});

  ResumeInfo adam;  // Adam has no momentum to restore
  adam.restored_optimizer = OptimizerSettings{"Adam", {{"lr", 0.001}, {"betas", std::vector<double>{0.9, 0.999}}}};
  const Sentences said = resume_report(adam, flags);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].substr(0, 45), "--lr 0.2 differs from the checkpoint's 0.001:");
}

// End to end: what load_checkpoint restores is what the report compares, and the sentence is
// true: the optimiser trains on with the checkpoint's rate and momentum.
TEST(ResumeReport, ReadsWhatLoadCheckpointRestored) {
  const test::TempDir dir("resume_report");
  const std::string path = dir.file("checkpoint.safetensors");
  manual_seed(1);
  const std::shared_ptr<Module> saved_model = make_model("mlp");
  SGD saved_sgd(saved_model->parameters(), SGDOptions(0.1).momentum(0.9));
  DistributedSampler saved_sampler(40, 1, 0, DistributedSamplerOptions().seed(5));
  TrainingState saved;
  saved.model = saved_model.get();
  saved.optimizer = &saved_sgd;
  saved.sampler = &saved_sampler;
  save_checkpoint(path, saved, 0, 1);

  const std::shared_ptr<Module> model = make_model("mlp");
  SGD sgd(model->parameters(), SGDOptions(0.2).momentum(0.5));
  DistributedSampler sampler(40, 1, 0, DistributedSamplerOptions().seed(7));
  TrainingState state;
  state.model = model.get();
  state.optimizer = &sgd;
  state.sampler = &sampler;
  const ResumeInfo info = load_checkpoint(path, state, Device::cpu(), 0, 1);
  ResumeFlags flags;
  flags.lr = 0.2;
  flags.momentum = 0.5;
  flags.seed = 7;
  const Sentences said = resume_report(info, flags);
  ASSERT_EQ(said.size(), 3u);
  EXPECT_EQ(said[0].substr(0, 45), "--lr 0.2 differs from the checkpoint's 0.1: t");
  EXPECT_EQ(said[1].substr(0, 50), "--momentum 0.5 differs from the checkpoint's 0.9: ");
  EXPECT_EQ(said[2].substr(0, 44), "--seed 7 differs from the checkpoint's 5: th");
  EXPECT_EQ(sgd.lr(), 0.1);
  EXPECT_EQ(std::get<double>(sgd.state_dict().param_group.at("momentum")), 0.9);
  EXPECT_EQ(sampler.seed(), 5u);
}

}  // namespace
}  // namespace lockstep
