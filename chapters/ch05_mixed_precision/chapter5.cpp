// Chapter 5: mixed precision — chapter 4's DistributedDataParallel training with the forward
// pass under autocast (bf16 or f16 matmuls and convolutions, f32 master weights) and, for f16,
// dynamic loss scaling with a GradScaler whose skipped steps every rank agrees on.
// Run: make chapter5 && ./chapter5, or mpirun -n 2 ./chapter5
#include <algorithm>
#include <cstdio>
#include <limits>

#include "common/device_choice.h"
#include "common/model_flops.h"
#include "common/distributed_evaluation.h"
#include "common/distributed_run.h"
#include "common/named_datasets.h"
#include "common/preemption.h"
#include "common/program.h"
#include "common/settings_agreement.h"
#include "common/step_metrics.h"
#include "common/train_flags.h"
#include "common/training_loss.h"
#include "lockstep.h"
#include "tensor/ops/cpu/gemm_bf16.h"
#include "util/timer.h"

using namespace lockstep;

namespace {

struct Options {
  std::string model = "cnn";
  std::string dataset = "fashion-mnist";
  std::string amp = "auto";
  std::string scaler = "auto";
  std::string comm_hook = "none";
  TrainFlags train;
  double init_scale = 65536.0;
  int64_t growth_interval = 2000;
  int64_t inf_at_step = 0;
  int inf_on_rank = 0;
  RankFlags rank;
  std::string metrics;
};

// What --amp and --scaler resolve to on `device`.
struct Precision {
  bool autocast = false;
  DType dtype = DType::bf16;  // the region's dtype (a valid one even when autocast is off)
  bool scaler = false;
  std::string name;          // "off", "bf16" or "f16"
};

//! [precision]
// --amp auto is PyTorch's default per device: bf16 on a CPU (f16 has no fast arithmetic on
// most CPUs), f16 on a GPU (every tensor core has it). --scaler auto scales the loss for f16
// only: bf16 has f32's exponent range, so its gradients do not underflow.
Precision resolve_precision(const Options& o, Device device) {
  Precision p;
  p.name = o.amp == "auto" ? (device.is_cuda() ? "f16" : "bf16") : o.amp;
  p.autocast = p.name != "off";
  p.dtype = p.name == "f16" ? DType::f16 : DType::bf16;
  p.scaler = o.scaler == "auto" ? p.name == "f16" : o.scaler == "on";
  return p;
}
//! [precision]

// One line saying what computes the 16-bit products on this device.
std::string precision_line(const Precision& p, Device device) {
  if (!p.autocast) return "amp: off (f32 everywhere)";
  std::string line = "amp: " + p.name + " autocast on " + (device.is_cuda() ? "cuda" : "cpu") + ", ";
  if (device.is_cuda()) {
    line += "16-bit GEMMs on tensor cores (cublasGemmEx, f32 sums)";
  } else if (p.dtype == DType::bf16) {
    line += std::string("16-bit GEMMs on the ") + cpu::gemm_bf16_path() + " path";
  } else {
    line += "f16 widened to f32 for the GEMMs (this CPU has no f16 arithmetic: slower than --amp off)";
  }
  return line + "; loss scaling " + (p.scaler ? "on" : "off");
}

CommHook parse_comm_hook(const std::string& name) {
  return name == "fp16" ? CommHook::fp16_compress : name == "bf16" ? CommHook::bf16_compress : CommHook::none;
}

int run(const Options& o) {
  // Chapter 4's start: ranks, threads, device, process group.
  const DistributedRank started = start_rank(o.rank);
  const Device device = started.choice.device;
  ProcessGroup& group = *started.group;
  check_ranks_agree(group, device,
                    {shared("--model", o.model), shared("--dataset", o.dataset), shared("--epochs", o.train.epochs),
                     shared("--max-steps", o.train.max_steps), shared("--batch-size", o.train.batch_size),
                     shared("--lr", o.train.lr), shared("--momentum", o.train.momentum), shared("--seed", o.train.seed),
                     shared("--amp", o.amp), shared("--scaler", o.scaler), shared("--comm-hook", o.comm_hook),
                     shared("--init-scale", o.init_scale), shared("--growth-interval", o.growth_interval),
                     shared("--inf-at-step", o.inf_at_step), shared("--inf-on-rank", o.inf_on_rank)});
  LOCKSTEP_CHECK_AGREED(o.inf_at_step == 0 || o.inf_on_rank < group.size(), "--inf-on-rank ", o.inf_on_rank,
                        ": the job has only ", group.size(), " rank(s), numbered from 0");

  const Precision precision = resolve_precision(o, device);
  print_rank0(precision_line(precision, device));

  check_model_fits_dataset(o.model, o.dataset);
  StepMetrics metrics(group.rank() == 0 ? o.metrics : "", {"scale", "skipped"});
  const TrainTestSets data = load_train_test(o.dataset, o.train.data);
  // Each rank reads its own copy of the data: the copies must be the same, in size and bytes.
  check_ranks_agree(group, device, {shared("--data (training images)", data.train->size()),
                                    shared("--data (test images)", data.test->size()),
                                    shared("--data (files' contents)", data.fingerprint)});

  // The model and its DDP wrapper, as in chapter 4. The parameters are f32 and stay f32:
  //    they are the master weights; autocast casts them for each forward pass.
  manual_seed(o.train.seed + static_cast<uint64_t>(group.rank()));
  std::shared_ptr<Module> model = make_model(o.model, dataset_channels(o.dataset));
  model->to(device);
  const CommHook hook = parse_comm_hook(o.comm_hook);
  auto ddp = std::make_shared<DistributedDataParallel>(model, DistributedDataParallelOptions().comm_hook(hook));
  int64_t wire_bytes = 0;
  for (const BucketSummary& bucket : ddp->buckets()) wire_bytes += bucket.comm_bytes;
  print_rank0("gradients: " + comm_hook_name(hook) + ", " + std::to_string(wire_bytes) + " bytes per rank per step");

  auto sampler = std::make_shared<DistributedSampler>(data.train->size(), group.size(), group.rank(),
                                                      DistributedSamplerOptions().seed(o.train.seed));
  DataLoader loader(data.train, DataLoaderOptions(o.train.batch_size).sampler(sampler).pin_memory(device.is_cuda()));
  // An overflow planted after the last step would never happen: refused rather than unseen.
  const int64_t steps_per_epoch = (sampler->num_samples() + o.train.batch_size - 1) / o.train.batch_size;
  const int64_t run_steps = o.train.max_steps > 0 ? std::min(o.train.max_steps, o.train.epochs * steps_per_epoch)
                                                  : o.train.epochs * steps_per_epoch;
  LOCKSTEP_CHECK_AGREED(o.inf_at_step <= run_steps, "--inf-at-step ", o.inf_at_step, ": the run has only ", run_steps,
                        " step(s) (", o.train.epochs, " epoch(s) of ", steps_per_epoch,
                        " steps", o.train.max_steps > 0 ? ", --max-steps " + std::to_string(o.train.max_steps) : "",
                        "), so no gradient would overflow; choose a step from 1 to ", run_steps);
  SGD optimizer(ddp->parameters(), SGDOptions(o.train.lr).momentum(o.train.momentum));
  //! [scaler]
  // The scaler. Disabled (bf16, or --amp off), it passes everything through: scale(loss) is
  //    the loss, step() always steps.
  GradScaler scaler(GradScalerOptions()
                        .enabled(precision.scaler)
                        .init_scale(o.init_scale)
                        .growth_interval(o.growth_interval));
  //! [scaler]

  PreemptionWatch preemption;  // SIGUSR1, SIGTERM or SIGINT: every rank stops after the same step
  bool preempted = false;
  int64_t step = 0, samples = 0, skipped = 0;
  double train_seconds = 0.0;
  Tensor loss;
  Evaluation result;
  // MFU's peak: this rank's, for the dtype the matrix products run in (autocast's, or f32).
  const double rank_peak =
      rank_peak_flops(device, precision.autocast ? precision.dtype : DType::f32, get_num_threads());
  TrainingFlops flops;
  int epoch = 0;
  while (epoch < o.train.epochs && (o.train.max_steps == 0 || step < o.train.max_steps)) {
    sampler->set_epoch(epoch);
    ++epoch;
    ddp->train();
    const Tensor epoch_loss = zeros({}, TensorOptions().device(device));
    int64_t epoch_steps = 0, epoch_skipped = 0;
    const int64_t samples_before = samples;
    Timer timer;
    flops.start();
    for (const Batch& batch : loader) {
      const Tensor inputs = batch.inputs.to(device, true);    // inputs: (B, C, H, W), this rank's
      const Tensor targets = batch.targets.to(device, true);  // targets: (B)
      ++step;
      //! [loop]
      // The forward pass under autocast: convolutions and linear layers in 16 bits, the
      //    loss in f32 (cross_entropy is on autocast's f32 list). Backward runs outside it.
      {
        const AutocastGuard autocast(device.type(), precision.dtype, precision.autocast);
        loss = cross_entropy((*ddp)(inputs), targets);  // loss: f32
      }
      optimizer.zero_grad();
      Tensor scaled = scaler.scale(loss);
      // --inf-at-step: this rank's gradients overflow, as if its scaled loss had been too large.
      if (step == o.inf_at_step && group.rank() == o.inf_on_rank) {
        scaled = scaled * scalar_like(std::numeric_limits<double>::infinity(), scaled);
      }
      scaled.backward();                           // DDP all-reduces the (scaled, f32) gradients
      const bool stepped = scaler.step(optimizer);  // unscales; skips on any inf or NaN
      scaler.update();                              // halves the scale after a skip
      //! [loop]
      if (!stepped) {
        ++skipped;
        ++epoch_skipped;
        log_rank("step " + std::to_string(step) + " skipped: a gradient was inf or NaN; the scale is now " +
                 std::to_string(static_cast<long long>(scaler.get_scale())));
      }
      epoch_loss.add_(loss.detach());
      ++epoch_steps;
      samples += targets.numel();
      metrics.record(step, epoch, loss, timer, {scaler.get_scale(), stepped ? 0.0 : 1.0});
      if (o.train.max_steps > 0 && step >= o.train.max_steps) break;
      if ((preempted = preemption.should_stop())) break;
    }
    if (preempted) break;
    loss.item();  // wait for the device, so the time is the work's
    const double epoch_seconds = timer.seconds();
    train_seconds += epoch_seconds;
    const int64_t epoch_samples = samples - samples_before;
    const double rank_mfu = model_flops(flops.stop(), epoch_samples, epoch_samples / epoch_seconds, rank_peak).mfu;
    // Without --metrics nothing reads the loss during the epoch (a read would make the CPU wait
    // for a GPU), so the epoch's sum is checked once it is done, before a rank's NaN weights
    // could be taken for ranks drifting apart. It is the loss itself, not its scaled gradients:
    // a step the GradScaler skips for an f16 overflow is no error.
    const double epoch_loss_sum = epoch_loss.item();
    check_training_loss(epoch_loss_sum, epoch_steps, step, epoch);

    // Every rank must hold the same weights and the same scale, through any skipped step.
    //    BatchNorm's running statistics are made rank 0's first, as in chapter 4.
    ddp->sync_buffers();
    const InSyncReport sync = check_in_sync(ddp->module(), group);
    LOCKSTEP_CHECK(sync.in_sync, "the ranks drifted apart after epoch ", epoch, ": ", sync.difference);
    {
      const AutocastGuard autocast(device.type(), precision.dtype, precision.autocast);
      result = evaluate(ddp->module(), data.test, group, device);
    }
    char line[240];
    std::snprintf(line, sizeof line,
                  "epoch %d: loss %.4f (own batches), test_acc %.4f, scale %.0f, skipped %lld of %lld steps, checksum %s, "
                  "mfu %.3f",
                  epoch, epoch_loss_sum / std::max<int64_t>(1, epoch_steps), result.accuracy, scaler.get_scale(),
                  static_cast<long long>(epoch_skipped), static_cast<long long>(epoch_steps),
                  checksum_hex(sync.checksum).c_str(), rank_mfu);
    log_rank(line);
  }

  if (preempted) {
    print_rank0("preempted (" + preemption.reason() + "): every rank stopped after step " + std::to_string(step) +
                "; chapter 5 keeps no checkpoint (chapter 6's --checkpoint does), so nothing is saved");
    destroy_process_group();
    return kPreemptedExitStatus;
  }

  // Throughput over all ranks, as in chapter 4.
  const Throughput speed = all_rank_throughput(samples, train_seconds, loss, group, device);
  const ModelFlops mfu = model_flops(flops.total(), samples, speed.samples_per_s, rank_peak * group.size());
  print_rank0(ResultLine(5).add("model", o.model).add("device", device.is_cuda() ? "cuda" : "cpu")
                  .add("world", group.size()).add("epochs", epoch).add("batch", o.train.batch_size)
                  .add("samples_per_s", speed.samples_per_s).add("epoch_s", speed.slowest_s / epoch)
                  .add("test_acc", result.accuracy).add("final_loss", speed.mean_loss)
                  .add("amp", precision.name).add("skipped_steps", skipped).add("final_scale", scaler.get_scale())
                  .add("comm_hook", comm_hook_name(hook)).add("backend", group.backend_name())
                  .add("threads", get_num_threads()).add("flops_per_sample", mfu.per_sample).add("mfu", mfu.mfu)
                  .add("peak_bytes", memory_ledger(device).peak_total).str());
  destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 5: mixed precision (autocast, GradScaler) under DDP (run alone or with mpirun -n N)",
               "chapter5");
  Options o;
  app.option_defaults()->always_capture_default();
  add_model_and_dataset_options(app, o.model, o.dataset);
  app.add_option("--amp", o.amp, "autocast dtype: auto (bf16 on the CPU, f16 on CUDA), bf16, f16, or off (f32)")
      ->check(CLI::IsMember({"auto", "bf16", "f16", "off"}));
  app.add_option("--scaler", o.scaler, "loss scaling (GradScaler): auto (on for f16), on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--comm-hook", o.comm_hook, "send gradients as they are (none), or compressed to fp16 or bf16 "
                                             "(PyTorch's fp16_compress_hook / bf16_compress_hook)")
      ->check(CLI::IsMember({"none", "fp16", "bf16"}));
  add_train_flags(app, o.train, "samples per step on each rank", SeedUse::ranks);
  app.add_option("--init-scale", o.init_scale, "the GradScaler's first scale")->check(positive_number());
  app.add_option("--growth-interval", o.growth_interval, "clean steps in a row before the scale doubles")
      ->check(positive_number());
  CLI::Option* inf_at_step = app.add_option("--inf-at-step", o.inf_at_step, "make the gradients of step N (from 1) inf on one rank, to watch "
                                                 "the step being skipped everywhere (0: never)")
      ->check(non_negative_number());
  app.add_option("--inf-on-rank", o.inf_on_rank, "the rank whose gradients --inf-at-step makes inf")
      ->check(non_negative_number())
      ->needs(inf_at_step);
  add_rank_flags(app, o.rank);
  add_metrics_flag(app, o.metrics);
  return run_program(app, argc, argv, [&] { return run(o); });
}
