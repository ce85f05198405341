// Chapter 6: SyncBatchNorm, checkpoints that resume bit-exactly, and gradient accumulation —
// chapter 4's DistributedDataParallel training of a ResNet with BatchNorm, whose statistics can
// be computed over every rank's images at once; a checkpoint written by rank 0 alone, read back
// by every rank, from which a new job resumes exactly where the old one stopped; K
// micro-batches per optimiser step with one all-reduce; and a learning-rate warm-up for the
// larger effective batch.
// Run: make chapter6 && mpirun -n 2 ./chapter6
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/device_choice.h"
#include "common/model_flops.h"
#include "common/distributed_evaluation.h"
#include "common/distributed_run.h"
#include "common/fault_lab.h"
#include "common/named_datasets.h"
#include "common/preemption.h"
#include "common/program.h"
#include "common/resume_report.h"
#include "common/settings_agreement.h"
#include "common/step_metrics.h"
#include "common/train_flags.h"
#include "common/training_loss.h"
#include "lockstep.h"
#include "optim/lr_scheduler.h"
#include "util/timer.h"

using namespace lockstep;

namespace {

// Chapter 6 trains the ResNet by default: one epoch, 32 images per rank per micro-batch.
TrainFlags resnet_training() {
  TrainFlags flags;
  flags.epochs = 1;
  flags.batch_size = 32;
  return flags;
}

struct Options {
  std::string model = "resnet";
  std::string dataset = "fashion-mnist";
  std::string norm = "sync";
  std::string optimizer = "sgd";
  TrainFlags train = resnet_training();
  int64_t accumulate = 1;
  double warmup_epochs = 0.0;
  double warmup_start_factor = 0.0;  // 0: not given, 1 / (ranks x accumulate)
  int64_t save_every = 0;
  std::string checkpoint = "chapter6-checkpoint.safetensors";
  bool checkpoint_given = false;  // --checkpoint on the command line: a preempted run saves there too
  std::string resume;
  std::vector<std::string> command_line;  // argv, for the command that resumes a preempted run
  ResumeFlags given;                      // the flags a checkpoint overrides, where given
  std::string metrics;
  RankFlags rank;
  FaultFlags fault;
};

// The model by name, for the dataset's channels (1 for Fashion-MNIST, 3 for CIFAR-10); the
// mlp and cnn are chapter 2's Fashion-MNIST models.
std::shared_ptr<Module> build_model(const Options& o) {
  check_model_fits_dataset(o.model, o.dataset);
  return make_model(o.model, dataset_channels(o.dataset));
}

std::unique_ptr<Optimizer> build_optimizer(const Options& o, const std::vector<Tensor>& params) {
  if (o.optimizer == "adam") return std::make_unique<Adam>(params, AdamOptions(o.train.lr));
  return std::make_unique<SGD>(params, SGDOptions(o.train.lr).momentum(o.train.momentum));
}

// Every rank reads the checkpoint rank 0 just wrote back onto its own device and compares it,
// tensor by tensor, with its own model: the answer to "are the models saved by rank 0 and rank
// 1 the same?", from every rank's side.
void compare_with_checkpoint(const std::string& path, Module& model, Device device, int64_t step) {
  const StateDict saved = load_safetensors(path);
  size_t compared = 0;
  for (const auto& [name, tensor] : model.state_dict()) {
    for (const auto& [key, value] : saved) {
      if (key != "model." + name) continue;
      LOCKSTEP_CHECK(tensor_checksum(value.to(device)) == tensor_checksum(tensor), "the checkpoint's \"", name,
                     "\" differs from this rank's model");
      ++compared;
    }
  }
  log_rank("checkpoint of step " + std::to_string(step) + " read back: its " + std::to_string(compared) +
           " model tensors are bitwise this rank's");
}

// The first BatchNorm layer's running mean, channels 0-3: after one training forward it is
// 0.1 x the batch mean that layer normalised with (momentum 0.1, from zeros).
std::string first_running_mean(Module& model) {
  for (const auto& [name, buffer] : model.named_buffers()) {
    if (name.size() < 12 || name.compare(name.size() - 12, 12, "running_mean") != 0) continue;
    const std::vector<double> values = buffer.to(Device::cpu()).to(DType::f64).to_vector<double>();
    char line[160];
    std::snprintf(line, sizeof line, "%s[0:4] = %.5f %.5f %.5f %.5f", name.c_str(), values[0], values[1], values[2],
                  values[3]);
    return line;
  }
  return "no BatchNorm layer";
}

int run(const Options& o) {
  // Chapter 4's start: ranks, threads, device, process group, shared settings.
  const DistributedRank started = start_rank(o.rank);
  const Device device = started.choice.device;
  ProcessGroup& group = *started.group;
  const FaultLab faults(o.fault, group.rank(), group.size(), o.train.max_steps);
  // Goyal et al.'s warm-up starts from the rate of the batch --lr was scaled from: one rank's
  // micro-batch, 1 / (ranks x accumulate) of the step's images.
  const double warmup_start_factor =
      o.warmup_start_factor > 0.0 ? o.warmup_start_factor : 1.0 / static_cast<double>(group.size() * o.accumulate);
  check_ranks_agree(group, device,
                    {shared("--model", o.model), shared("--dataset", o.dataset), shared("--norm", o.norm),
                     shared("--optimizer", o.optimizer), shared("--epochs", o.train.epochs),
                     shared("--max-steps", o.train.max_steps), shared("--batch-size", o.train.batch_size),
                     shared("--accumulate", o.accumulate), shared("--lr", o.train.lr),
                     shared("--momentum", o.train.momentum),
                     shared("--warmup-epochs", o.warmup_epochs), shared("--warmup-start-factor", warmup_start_factor),
                     shared("--seed", faults.seed(o.train.seed)), shared("--save-every", o.save_every),
                     shared("--checkpoint", o.checkpoint), shared("--resume", o.resume)});
  // Flags that would do nothing, refused with the reason (the same on every rank, from here on).
  LOCKSTEP_CHECK_AGREED(o.warmup_epochs <= o.train.epochs, "--warmup-epochs ", o.warmup_epochs,
                        " is longer than the run (--epochs ", o.train.epochs,
                        "): the learning rate would never reach --lr; warm up over fewer epochs");
  LOCKSTEP_CHECK_AGREED(!o.checkpoint.empty(),
                        "--checkpoint is empty: name the file checkpoints are written to (the default is "
                        "chapter6-checkpoint.safetensors)");
  // Checkpoints are written every --save-every steps, and when a signal stops the run if
  // --checkpoint was given: the file must be writable before any work.
  const bool saves = o.save_every > 0 || o.checkpoint_given;
  if (group.rank() == 0 && saves) check_output_file("--checkpoint", o.checkpoint);
  check_input_file("--resume", o.resume);
  StepMetrics metrics(group.rank() == 0 ? o.metrics : "");  // rank 0's optimiser steps
  const TrainTestSets data = load_train_test(o.dataset, o.train.data);
  check_ranks_agree(group, device, {shared("--data (training images)", data.train->size()),
                                    shared("--data (test images)", data.test->size()),
                                    shared("--data (files' contents)", data.fingerprint)});

  //! [convert]
  // The model. With --norm sync every BatchNorm2d becomes a SyncBatchNorm: in training, its
  //    statistics are those of every rank's images together (one all-gather per layer in
  //    forward, one all-reduce in backward), as if one process saw the whole batch.
  manual_seed(o.train.seed + static_cast<uint64_t>(group.rank()));
  std::shared_ptr<Module> model = faults.model(build_model(o));
  if (o.norm == "sync") model = convert_sync_batchnorm(model);
  model->to(device);
  //! [convert]
  const std::unique_ptr<Optimizer> optimizer = build_optimizer(o, model->parameters());
  auto sampler = std::make_shared<DistributedSampler>(data.train->size(), group.size(), group.rank(),
                                                      DistributedSamplerOptions().seed(o.train.seed));
  //! [warmup]
  // The warm-up: the optimiser holds --lr, the rate of the large effective batch; LinearLR
  //    starts at warmup_start_factor x --lr and adds an equal share after every optimiser step
  //    until --lr, --warmup-epochs later (PyTorch's LinearLR, stepped per iteration as Goyal et
  //    al. do). An epoch is the optimiser steps of one pass: micro-batches / --accumulate.
  std::unique_ptr<LinearLR> warmup;
  const int64_t micro_batches_per_epoch = (sampler->num_samples() + o.train.batch_size - 1) / o.train.batch_size;
  LOCKSTEP_CHECK_AGREED(o.accumulate <= micro_batches_per_epoch, "--accumulate ", o.accumulate, ": an epoch has only ",
                        micro_batches_per_epoch, " micro-batch(es) of --batch-size ", o.train.batch_size,
                        " per rank, so no optimiser step would ever run; use --accumulate ", micro_batches_per_epoch,
                        " or fewer, or a smaller --batch-size");
  const int64_t steps_per_epoch = micro_batches_per_epoch / o.accumulate;
  const int64_t warmup_steps =
      std::max<int64_t>(1, std::llround(o.warmup_epochs * static_cast<double>(steps_per_epoch)));
  if (o.warmup_epochs > 0.0) warmup = std::make_unique<LinearLR>(*optimizer, warmup_start_factor, 1.0, warmup_steps);
  //! [warmup]
  //! [state]
  // What a checkpoint holds: the model (the inner one, without DDP's "module." prefix), the
  //    optimiser's state, the warm-up's step count, the sampler's seed and position, every
  //    rank's random state.
  TrainingState state;
  state.model = model.get();
  state.optimizer = optimizer.get();
  state.scheduler = warmup.get();  // null without a warm-up
  state.sampler = sampler.get();
  state.batch_size = o.train.batch_size;
  //! [state]
  int64_t step = 0, first_epoch = 0, resumed_in_epoch = 0;
  if (!o.resume.empty()) {
    //! [resume]
    // Resume: every rank reads the file onto its own device (map_location) before DDP
    //    wraps the model, as PyTorch's recipe does; the sampler continues mid-epoch.
    const ResumeInfo info = load_checkpoint(o.resume, state, device, group.rank(), group.size());
    //! [resume]
    step = info.global_step;
    first_epoch = info.epoch;
    resumed_in_epoch = info.step_in_epoch;
    print_rank0("resumed from " + o.resume + ": epoch " + std::to_string(info.epoch + 1) + ", " +
                std::to_string(info.step_in_epoch) + " micro-batch(es) of it done, step " +
                std::to_string(info.global_step) + (info.bit_exact ? " (bit-exact)" : ""));
    for (const std::string& note : info.notes) print_rank0("  note: " + note);
    // Flags given for a setting the checkpoint restored (the rate, the seed, the warm-up):
    // its value is used, and each such flag is named.
    // (The steps the flags ask for: the loaded scheduler already holds the checkpoint's.)
    ResumeFlags flags = o.given;
    flags.warmup_steps = warmup_steps;
    for (const std::string& note : resume_report(info, flags)) print_rank0("  note: " + note);
  }
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  DataLoader loader(data.train, DataLoaderOptions(o.train.batch_size).sampler(sampler).pin_memory(device.is_cuda()));
  print_rank0("model: " + o.model + " with " + (o.norm == "sync" ? "SyncBatchNorm" : "BatchNorm2d") + ", " +
              std::to_string(o.train.batch_size) + " images per rank per micro-batch, " + std::to_string(o.accumulate) +
              " micro-batch(es) per step: " + std::to_string(o.train.batch_size * o.accumulate * group.size()) +
              " images per optimiser step");
  if (warmup) {
    char line[200];
    std::snprintf(line, sizeof line, "warm-up: lr from %g to %g over %lld optimiser steps (an epoch is %lld steps)",
                  warmup->base_lr() * warmup->start_factor(), warmup->base_lr(),
                  static_cast<long long>(warmup->total_iters()), static_cast<long long>(steps_per_epoch));
    print_rank0(line);
  }

  int64_t samples = 0, quiet_backwards = 0;
  double train_seconds = 0.0;
  Tensor loss;
  Evaluation result;
  int epoch = static_cast<int>(first_epoch);
  bool printed_statistics = false;
  uint64_t final_checksum = 0;
  // MFU's peak: this rank's; and the last epoch's MFU on this rank, for its line.
  const double rank_peak = rank_peak_flops(device, DType::f32, get_num_threads());
  TrainingFlops flops;
  double epoch_mfu = 0.0;
  // The end of an epoch: every rank's model compared, then evaluated on the test set.
  auto finish_epoch = [&] {
    ddp->sync_buffers();
    const InSyncReport sync = check_in_sync(ddp->module(), group);
    LOCKSTEP_CHECK(sync.in_sync, "the ranks drifted apart after epoch ", epoch, ": ", sync.difference);
    result = evaluate(ddp->module(), data.test, group, device);
    char line[200];
    std::snprintf(line, sizeof line, "epoch %d: checksum %s, test_acc %.4f over %.0f images, mfu %.3f", epoch,
                  checksum_hex(sync.checksum).c_str(), result.accuracy, result.count, epoch_mfu);
    log_rank(line);
    final_checksum = sync.checksum;
  };
  // A finished job submitted again (or resumed from its last checkpoint) trains nothing more:
  // it says so, and evaluates what it loaded as the epoch it ended in.
  const bool last_epoch_done = epoch == o.train.epochs - 1 && resumed_in_epoch >= micro_batches_per_epoch;
  const bool nothing_left =
      epoch >= o.train.epochs || last_epoch_done || (o.train.max_steps > 0 && step >= o.train.max_steps);
  if (nothing_left) {
    ++epoch;
    print_rank0("nothing left to train: the checkpoint is at step " + std::to_string(step) + ", epoch " +
                std::to_string(first_epoch + 1) + ", and the run ends at " +
                (o.train.max_steps > 0 ? "--max-steps " + std::to_string(o.train.max_steps)
                                       : "--epochs " + std::to_string(o.train.epochs)) +
                "; evaluating the checkpoint's model");
    finish_epoch();
  }
  //! [save]
  // Save on rank 0 (every rank holds the same model and optimiser state), after gathering
  //    every rank's random state; then a barrier, so that no rank reads the file before it is
  //    complete, and every rank compares it with its own model.
  auto save = [&](int64_t done_in_epoch) {
    state.epoch = epoch - 1;
    state.step_in_epoch = done_in_epoch;
    state.global_step = step;
    state.default_generator_states = all_gather_generator_states(cpu_process_group());
    save_checkpoint(o.checkpoint, state, group.rank(), group.size());
    group.barrier();
    compare_with_checkpoint(o.checkpoint, *model, device, step);
  };
  //! [save]
  PreemptionWatch preemption(/*enabled=*/!faults.unpairs_collectives());
  bool preempted = false;
  while (epoch < o.train.epochs && (o.train.max_steps == 0 || step < o.train.max_steps)) {
    sampler->set_epoch(epoch);  // after a resume, the same epoch keeps its position
    // Micro-batches of this epoch done: those before a resume, then this run's.
    int64_t done_in_epoch = sampler->start_position() / (o.train.batch_size * group.size());
    ++epoch;
    ddp->train();
    const int64_t samples_before = samples;
    Timer timer;
    flops.start();
    int64_t micro = 0;          // micro-batches of the current step so far
    int64_t epoch_batches = 0;  // micro-batches this run trained in this epoch
    for (const Batch& batch : loader) {
      if (faults.runs_out_before(done_in_epoch + 1)) break;  // --fault kill, freeze, uneven
      const Tensor inputs = batch.inputs.to(device, true);    // inputs: (B, C, H, W), this rank's
      const Tensor targets = batch.targets.to(device, true);  // targets: (B)
      //! [accumulate]
      // K micro-batches per step: the first K-1 backward passes inside no_sync() only add
      //    to param.grad() on each rank; the K-th averages the sum across ranks, once. The
      //    warm-up moves the learning rate once per optimiser step, after it (PyTorch's order).
      const bool last_micro = ++micro == o.accumulate;
      if (micro == 1) optimizer->zero_grad();
      const bool backward = !faults.skips_backward(done_in_epoch + 1);  // --fault skip-backward
      if (!last_micro) {
        auto no_sync = ddp->no_sync();
        loss = cross_entropy((*ddp)(inputs), targets);
        if (backward) (loss / static_cast<double>(o.accumulate)).backward();  // local: no all-reduce
        ++quiet_backwards;
      } else {
        loss = cross_entropy((*ddp)(inputs), targets);
        if (backward) (loss / static_cast<double>(o.accumulate)).backward();  // the step's one all-reduce
        optimizer->step();
        if (warmup) warmup->step();
        micro = 0;
        ++step;
        metrics.record(step, epoch, loss, timer);
      }
      //! [accumulate]
      ++done_in_epoch;
      ++epoch_batches;
      samples += targets.numel();
      if (!printed_statistics) {
        // The statistics each rank's first forward normalised with: its own batch's with
        // BatchNorm2d, every rank's together with SyncBatchNorm.
        log_rank("after this run's first forward, " + first_running_mean(ddp->module()));
        printed_statistics = true;
      }
      const bool saved = micro == 0 && o.save_every > 0 && step % o.save_every == 0;
      if (saved) save(done_in_epoch);
      if (micro == 0 && o.train.max_steps > 0 && step >= o.train.max_steps) break;
      //! [preempt]
      // A signal (SIGUSR1, SIGTERM, SIGINT) on any rank: every rank stops after the same
      //    step, and the run is saved there so that it can go on later.
      if (micro == 0 && (preempted = preemption.should_stop())) {
        if (saves && !saved) save(done_in_epoch);
        break;
      }
      //! [preempt]
    }
    if (preempted) break;
    // A run resumed from the end of an epoch has no batch of it left: only its evaluation.
    if (epoch_batches > 0) {
      loss.item();  // wait for the device, so the time is the work's
      const double epoch_seconds = timer.seconds();
      train_seconds += epoch_seconds;
      const int64_t epoch_samples = samples - samples_before;
      epoch_mfu = model_flops(flops.stop(), epoch_samples, epoch_samples / epoch_seconds, rank_peak).mfu;
      check_training_loss(loss.item(), 1, step, epoch);
    }
    finish_epoch();
  }

  if (preempted) {
    print_rank0("preempted (" + preemption.reason() + "): every rank stopped after step " + std::to_string(step) +
                (saves ? "; checkpoint " + o.checkpoint + " written. Resume with:\n  " +
                             resume_command(o.command_line, group.size(), o.checkpoint)
                       : "; nothing saved (give --checkpoint FILE to save a preempted run)"));
    destroy_process_group();
    return kPreemptedExitStatus;
  }

  // Every rank trained the same number of steps, so either all of them collect the throughput
  // or none does.
  const Throughput speed = samples > 0 ? all_rank_throughput(samples, train_seconds, loss, group, device)
                                       : Throughput{0.0, 0.0, std::nan("")};
  const ModelFlops mfu = model_flops(flops.total(), samples, speed.samples_per_s, rank_peak * group.size());
  const int64_t saved = quiet_backwards * static_cast<int64_t>(ddp->buckets().size());
  if (o.accumulate > 1) {
    print_rank0("accumulation: " + std::to_string(quiet_backwards) + " backward pass(es) inside no_sync() saved " +
                std::to_string(saved) + " bucket all-reduce(s)");
  }
  print_rank0(ResultLine(6).add("model", o.model).add("norm", o.norm).add("device", device.is_cuda() ? "cuda" : "cpu")
                  .add("world", group.size()).add("epochs", epoch).add("steps", step).add("batch", o.train.batch_size)
                  .add("accumulate", o.accumulate).add("samples_per_s", speed.samples_per_s)
                  .add("test_acc", result.accuracy).add("final_loss", speed.mean_loss)
                  .add("saved_allreduces", saved).add("checksum", checksum_hex(final_checksum))
                  .add("backend", group.backend_name()).add("flops_per_sample", mfu.per_sample).add("mfu", mfu.mfu)
                  .add("peak_bytes", memory_ledger(device).peak_total).str());
  destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 6: SyncBatchNorm, resumable checkpoints and gradient accumulation under DDP "
               "(run with mpirun -n N)",
               "chapter6");
  Options o;
  app.option_defaults()->always_capture_default();
  add_model_and_dataset_options(app, o.model, o.dataset);
  app.add_option("--norm", o.norm, "sync (SyncBatchNorm: statistics over all ranks) or batch (each rank its own)")
      ->check(CLI::IsMember({"sync", "batch"}));
  app.add_option("--optimizer", o.optimizer, "sgd (with --momentum) or adam")->check(CLI::IsMember({"sgd", "adam"}));
  add_train_flags(app, o.train, "images per rank per micro-batch", SeedUse::ranks);
  app.add_option("--accumulate", o.accumulate, "micro-batches per optimiser step (K-1 of them inside no_sync())")
      ->check(positive_number());
  CLI::Option* warmup_epochs =
      app.add_option("--warmup-epochs", o.warmup_epochs,
                     "warm the learning rate up in a straight line to --lr over this many epochs, one increment per "
                     "optimiser step (Goyal et al.'s warm-up for a large batch; 0: none)")
          ->check(non_negative_number());
  app.add_option("--warmup-start-factor", o.warmup_start_factor,
                 "the warm-up's first learning rate, as a fraction of --lr (default: 1 / (ranks x --accumulate), the "
                 "rate of one micro-batch when --lr was scaled linearly with the batch)")
      ->check(positive_number())
      ->check(number_between(0.0, 1.0))
      ->default_str("1/(ranks x accumulate)")
      ->needs(warmup_epochs);
  app.add_option("--save-every", o.save_every, "rank 0 writes a checkpoint every N optimiser steps (0: never)")
      ->check(non_negative_number());
  app.add_option("--checkpoint", o.checkpoint,
                 "the checkpoint file --save-every writes; given, a run stopped by SIGUSR1, SIGTERM or SIGINT "
                 "saves there too");
  app.add_option("--resume", o.resume, "go on from this checkpoint: model, optimiser, position, random state");
  add_metrics_flag(app, o.metrics);
  add_rank_flags(app, o.rank);
  add_fault_flags(app, o.fault);
  o.command_line.assign(argv, argv + argc);
  return run_program(app, argc, argv, [&] {
    // Each rank reads its own command line here, before any rank waits for another.
    LOCKSTEP_CHECK(o.optimizer == "sgd" || app.count("--momentum") == 0, "--momentum ", o.train.momentum,
                   " is SGD's, and --optimizer adam has none (Adam keeps its own moving averages, with PyTorch's "
                   "betas 0.9 and 0.999): leave --momentum out, or train with --optimizer sgd");
    o.checkpoint_given = app.count("--checkpoint") > 0;
    if (app.count("--lr") > 0) o.given.lr = o.train.lr;
    if (app.count("--momentum") > 0) o.given.momentum = o.train.momentum;
    if (app.count("--seed") > 0) o.given.seed = o.train.seed;
    if (app.count("--warmup-epochs") > 0) o.given.warmup_epochs = o.warmup_epochs;
    if (app.count("--warmup-start-factor") > 0) o.given.warmup_start_factor = o.warmup_start_factor;
    return run(o);
  });
}
