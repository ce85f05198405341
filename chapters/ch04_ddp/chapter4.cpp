// Chapter 4: DistributedDataParallel — one process per rank, each with the whole model and its
// own shard of the data, gradients averaged across ranks during backward.
// Run: make chapter4 && mpirun -n 2 ./chapter4
#include <cstdio>
#include <iostream>

#include "common/device_choice.h"
#include "common/model_flops.h"
#include "common/distributed_evaluation.h"
#include "common/distributed_run.h"
#include "common/fault_lab.h"
#include "common/named_datasets.h"
#include "common/preemption.h"
#include "common/program.h"
#include "common/settings_agreement.h"
#include "common/step_metrics.h"
#include "common/train_flags.h"
#include "common/training_loss.h"
#include "lockstep.h"
#include "util/timer.h"
#include "util/trace.h"

using namespace lockstep;

namespace {

struct Options {
  std::string model = "cnn";
  std::string dataset = "fashion-mnist";
  TrainFlags train;
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  bool no_set_epoch = false;
  bool find_unused_parameters = false;
  bool join = false;
  RankFlags rank;
  FaultFlags fault;
  std::string save;
  std::string trace;
  std::string metrics;
};

int run(const Options& o) {
  // 1-2. Who are we, on which device, in which process group (chapters/common/distributed_run.cpp
  //      has the steps): mpirun started this program world_size times.
  const DistributedRank started = start_rank(o.rank);
  const Device device = started.choice.device;
  ProcessGroup& group = *started.group;
  // The fault lab (--fault) makes one rank misbehave on purpose; see "Questions users ask".
  const FaultLab faults(o.fault, group.rank(), group.size(), o.train.max_steps);
  const uint64_t seed = faults.seed(o.train.seed);
  // Settings that every rank must share are compared now, before they can hang or corrupt a
  // collective (chapters/common/settings_agreement.h).
  check_ranks_agree(group, device,
                    {shared("--model", o.model), shared("--dataset", o.dataset), shared("--epochs", o.train.epochs),
                     shared("--max-steps", o.train.max_steps), shared("--batch-size", o.train.batch_size),
                     shared("--lr", o.train.lr), shared("--momentum", o.train.momentum), shared("--seed", seed),
                     shared("--bucket-cap-mb", o.bucket_cap_mb), shared("--first-bucket-cap-mb", o.first_bucket_cap_mb),
                     shared("--no-set-epoch", o.no_set_epoch), shared("--trace", o.trace.empty() ? "off" : "on"),
                     shared("--find-unused-parameters", o.find_unused_parameters), shared("--join", o.join)});

  check_model_fits_dataset(o.model, o.dataset);
  check_output_file("--save", o.save);
  check_output_file("--trace", o.trace);
  StepMetrics metrics(group.rank() == 0 ? o.metrics : "");  // rank 0's steps
  // Every rank records a timeline of its spans (forward, backward, each autograd node, each
  // all-reduce on the MPI worker's row...), merged into one file at the end.
  if (!o.trace.empty()) enable_trace();
  const TrainTestSets data = load_train_test(o.dataset, o.train.data);
  // Each rank reads its own copy of the data: the copies must be the same, in size and bytes.
  check_ranks_agree(group, device, {shared("--data (training images)", data.train->size()),
                                    shared("--data (test images)", data.test->size()),
                                    shared("--data (files' contents)", data.fingerprint)});
  const std::shared_ptr<const Dataset> train_set = data.train, test_set = data.test;

  //! [broadcast]
  // Every rank builds the model with its own seed, so the copies start different, and
  //    wrapping them in DDP copies rank 0's weights to all: check_in_sync shows both.
  manual_seed(seed + static_cast<uint64_t>(group.rank()));
  std::shared_ptr<Module> model = faults.model(make_model(o.model, dataset_channels(o.dataset)));
  model->to(device);
  const InSyncReport before = check_in_sync(*model, group);
  print_rank0("before DDP: " + (before.in_sync ? std::string("in sync") : "not in sync: " + before.difference));
  auto ddp = std::make_shared<DistributedDataParallel>(
      model, DistributedDataParallelOptions()
                 .bucket_cap_mb(o.bucket_cap_mb)
                 .first_bucket_cap_mb(o.first_bucket_cap_mb)
                 .find_unused_parameters(o.find_unused_parameters));
  const InSyncReport after = check_in_sync(ddp->module(), group);
  print_rank0("after DDP:  " + (after.in_sync ? "in sync, checksum " + checksum_hex(after.checksum) : after.difference));
  //! [broadcast]

  //! [buckets]
  // The buckets, in the order their all-reduces start during backward: last layers first.
  const std::vector<BucketSummary> buckets = ddp->buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const BucketSummary& bucket = buckets[b];
    std::string names;
    for (const std::string& name : bucket.names) names += " " + name;
    char line[160];
    std::snprintf(line, sizeof line, "bucket %zu: %6.3f MiB,", b, bucket.bytes / (1024.0 * 1024.0));
    print_rank0(line + names);
  }
  //! [buckets]

  //! [sampler]
  // Each rank trains on its own shard: every world_size-th index of one permutation that all
  //    ranks draw from the same seed + epoch. The batch size is per rank.
  auto sampler = std::make_shared<DistributedSampler>(train_set->size(), group.size(), group.rank(),
                                                      DistributedSamplerOptions().seed(seed));
  DataLoader loader(train_set, DataLoaderOptions(o.train.batch_size).sampler(sampler).pin_memory(device.is_cuda()));
  log_rank("shard: " + std::to_string(sampler->size()) + " of " + std::to_string(train_set->size()) +
           " training images, " + std::to_string(loader.size()) + " steps per epoch");
  print_rank0("effective batch: " + std::to_string(o.train.batch_size) + " x " + std::to_string(group.size()) + " = " +
              std::to_string(o.train.batch_size * group.size()));
  //! [sampler]

  SGD optimizer(ddp->parameters(), SGDOptions(o.train.lr).momentum(o.train.momentum));
  // SIGUSR1, SIGTERM or SIGINT: every rank stops after the same step (chapter 6 explains).
  // With --join the ranks step different numbers of times, so they agree at epoch ends only.
  PreemptionWatch preemption(/*enabled=*/!faults.unpairs_collectives());
  bool preempted = false;
  int64_t step = 0, samples = 0;
  double train_seconds = 0.0;
  Tensor loss;
  Evaluation result;
  // MFU's peak: this rank's device (or its CPU threads); the job's is world size times that.
  const double rank_peak = rank_peak_flops(device, DType::f32, get_num_threads());
  TrainingFlops flops;
  int epoch = 0;
  while (epoch < o.train.epochs && (o.train.max_steps == 0 || step < o.train.max_steps)) {
    //! [loop]
    // The loop is chapter 2's: DDP hides the communication inside backward().
    if (!o.no_set_epoch) sampler->set_epoch(epoch);  // a new shuffle each epoch
    ++epoch;
    const std::vector<int64_t> order = sampler->indices();
    log_rank("epoch " + std::to_string(epoch) + " starts with samples " + std::to_string(order[0]) + ", " +
             std::to_string(order[1]) + ", " + std::to_string(order[2]));
    ddp->train();
    // Progress: a plain line every kReportSteps steps (several ranks' output shares one stream,
    // where a redrawn bar would garble), with the mean loss of those steps on this rank.
    const int64_t kReportSteps = 100;
    const Tensor window_loss = zeros({}, TensorOptions().device(device));
    Timer timer;
    flops.start();
    const int64_t samples_before = samples;
    int64_t batch_index = 0;
    // With --join, a rank that runs out of batches first shadows the others' collectives until
    // they are done too (section 11); without it, this Join does nothing.
    Join join(ddp, JoinOptions().enable(o.join));
    for (const Batch& batch : loader) {
      if (faults.runs_out_before(batch_index + 1)) break;  // --fault uneven or freeze
      const Tensor inputs = batch.inputs.to(device, true);    // inputs: (B, C, H, W), this rank's
      const Tensor targets = batch.targets.to(device, true);  // targets: (B)
      loss = cross_entropy((*ddp)(inputs), targets);
      optimizer.zero_grad();
      if (!faults.skips_backward(batch_index + 1)) loss.backward();  // gradients averaged over all ranks here
      optimizer.step();
      window_loss.add_(loss.detach());
      samples += targets.numel();
      ++step;
      metrics.record(step, epoch, loss, timer);
      if (++batch_index % kReportSteps == 0) {
        // Read for the report, the window's loss is checked too: a diverged run stops at the
        // first window whose loss is inf or NaN, without a wait of its own.
        const double window_sum = window_loss.item();
        check_training_loss(window_sum, kReportSteps, step, epoch);
        char line[96];
        std::snprintf(line, sizeof line, "  step %lld/%lld: loss %.4f", static_cast<long long>(batch_index),
                      static_cast<long long>(loader.size()), window_sum / kReportSteps);
        print_rank0(line);
        window_loss.zero_();
      }
      if (o.train.max_steps > 0 && step >= o.train.max_steps) break;
      if (!o.join && (preempted = preemption.should_stop())) break;
    }
    join.finish();
    loss.item();  // wait for the device, so the time is the work's
    const double epoch_seconds = timer.seconds();
    train_seconds += epoch_seconds;
    const int64_t epoch_samples = samples - samples_before;
    const double rank_mfu = model_flops(flops.stop(), epoch_samples, epoch_samples / epoch_seconds, rank_peak).mfu;
    //! [loop]
    // The steps after the last full window, now that the device has finished them (and before
    // a rank's NaN weights could be taken for ranks drifting apart).
    check_training_loss(window_loss.item(), batch_index % kReportSteps, step, epoch);
    if (o.join && !preempted) preempted = preemption.should_stop();
    if (preempted) break;

    //! [check]
    // Are the ranks still in lockstep? First the buffers: DDP's last forward broadcast rank
    //    0's (BatchNorm's running statistics), and then every rank updated its own from its own
    //    batch. Do now what the next forward would do, so that all ranks evaluate one model.
    ddp->sync_buffers();
    // Then each rank prints its own checksum of all parameters and buffers.
    const InSyncReport sync = check_in_sync(ddp->module(), group);
    LOCKSTEP_CHECK(sync.in_sync, "the ranks drifted apart after epoch ", epoch, ": ", sync.difference);
    result = evaluate(ddp->module(), test_set, group, device);
    char line[200];
    std::snprintf(line, sizeof line,
                  "epoch %d: checksum %s, test_acc %.4f over %.0f images (own shard alone: %.4f), mfu %.3f", epoch,
                  checksum_hex(sync.checksum).c_str(), result.accuracy, result.count, result.shard_accuracy, rank_mfu);
    log_rank(line);
    //! [check]
  }

  if (preempted) {
    print_rank0("preempted (" + preemption.reason() + "): every rank stopped after step " + std::to_string(step) +
                "; chapter 4 keeps no checkpoint (chapter 6's --checkpoint does), so nothing is saved");
    destroy_process_group();
    return kPreemptedExitStatus;
  }

  // Throughput over all ranks: every rank's samples, over the slowest rank's time.
  const Throughput speed = all_rank_throughput(samples, train_seconds, loss, group, device);
  const ModelFlops mfu = model_flops(flops.total(), samples, speed.samples_per_s, rank_peak * group.size());

  //! [save]
  // One file, written by rank 0 alone (all ranks hold the same weights), from the inner
  //    module: its keys read "0.weight", not "module.0.weight".
  if (!o.save.empty() && group.rank() == 0) {
    StateDict state = ddp->module().state_dict();
    for (auto& [name, tensor] : state) tensor = tensor.to(Device::cpu());
    save_safetensors(o.save, state);
    std::cout << "saved " << o.save << " (keys like \"" << state.front().first << "\"; the wrapper's would read \""
              << ddp->state_dict().front().first << "\")\n";
  }
  //! [save]
  if (!o.trace.empty()) {
    const int64_t spans = export_chrome_trace(o.trace, cpu_process_group());
    print_rank0("trace: " + std::to_string(spans) + " spans of " + std::to_string(group.size()) +
                " rank(s) written to " + o.trace + " (open it in https://ui.perfetto.dev)");
  }
  print_rank0(ResultLine(4).add("model", o.model).add("device", device.is_cuda() ? "cuda" : "cpu")
                  .add("world", group.size()).add("epochs", epoch).add("batch", o.train.batch_size)
                  .add("samples_per_s", speed.samples_per_s).add("epoch_s", speed.slowest_s / epoch)
                  .add("test_acc", result.accuracy).add("final_loss", speed.mean_loss)
                  .add("backend", group.backend_name()).add("threads", get_num_threads())
                  .add("flops_per_sample", mfu.per_sample).add("mfu", mfu.mfu)
                  .add("peak_bytes", memory_ledger(device).peak_total).str());
  destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 4: DistributedDataParallel on Fashion-MNIST or CIFAR-10 (run with mpirun -n N)", "chapter4");
  Options o;
  app.option_defaults()->always_capture_default();
  add_model_and_dataset_options(app, o.model, o.dataset);
  add_train_flags(app, o.train, "samples per step on each rank", SeedUse::ranks);
  app.add_option("--bucket-cap-mb", o.bucket_cap_mb, "DDP bucket size after the first, MiB")->check(positive_number());
  app.add_option("--first-bucket-cap-mb", o.first_bucket_cap_mb, "DDP first bucket size, MiB")->check(positive_number());
  app.add_flag("--no-set-epoch", o.no_set_epoch, "forget sampler.set_epoch(epoch): every epoch repeats one order");
  app.add_flag("--find-unused-parameters", o.find_unused_parameters,
               "let DDP average parameters that got no gradient (DistributedDataParallelOptions::find_unused_parameters)");
  app.add_flag("--join", o.join, "a rank that runs out of batches shadows the others' collectives (Join)");
  add_rank_flags(app, o.rank);
  add_fault_flags(app, o.fault);
  app.add_option("--save", o.save, "rank 0 writes the trained weights to this safetensors file");
  app.add_option("--trace", o.trace, "write every rank's timeline (Chrome trace JSON, for ui.perfetto.dev) to this "
                                     "file; use with --max-steps, it grows with every step");
  add_metrics_flag(app, o.metrics);
  return run_program(app, argc, argv, [&] { return run(o); });
}
