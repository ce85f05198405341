// Chapter 8: when the model does not fit — sharded data parallelism. The same training as
// chapter 4's DDP, with the model state spread over the ranks in four ways: none (DDP, a whole
// copy on every rank), zero1 (ZeroRedundancyOptimizer: the optimiser's state sharded), zero2
// (the gradients too, reduce-scattered bucket by bucket) and fsdp (fully_shard: the parameters
// too, gathered unit by unit for forward and backward). Each rank prints its memory ledger and
// the bytes it sent in a step beside the ZeRO paper's formulas.
// Run: make chapter8 && mpirun -n 2 ./chapter8
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/distributed_evaluation.h"
#include "common/distributed_run.h"
#include "common/named_datasets.h"
#include "common/program.h"
#include "common/settings_agreement.h"
#include "common/train_flags.h"
#include "common/training_loss.h"
#include "lockstep.h"
#include "util/timer.h"
#include "util/trace.h"

using namespace lockstep;

namespace {

// Chapter 8 trains ResNet-50, whose memory is the lesson, for a few steps: 16 images per rank.
TrainFlags sharding_training() {
  TrainFlags flags;
  flags.epochs = 1;
  flags.max_steps = 6;
  flags.batch_size = 16;
  flags.lr = 1e-3;
  return flags;
}

struct Options {
  std::string model = "resnet50";
  std::string dataset = "fashion-mnist";
  std::string shard = "fsdp";
  std::string optimizer = "adam";
  TrainFlags train = sharding_training();
  bool reshard_after_forward = true;
  bool prefetch = true;
  std::string amp = "off";
  double clip_grad_norm = 0.0;
  int64_t eval_images = 1000;
  int64_t save_every = 0;
  std::string checkpoint = "chapter8-checkpoint";
  std::string resume;
  std::string memory_timeline;
  std::string trace;
  RankFlags rank;
};

// The units fully_shard wraps, in the order forward runs them: a ResNet's blocks (the children
// of its stages layer1, layer2, ...), or else each child of the model that holds parameters.
std::vector<std::shared_ptr<Module>> units_of(Module& model) {
  std::vector<std::shared_ptr<Module>> units;
  for (const auto& [name, child] : model.named_children()) {
    if (name.rfind("layer", 0) == 0) {
      for (const auto& block : child->children()) units.push_back(block);
    }
  }
  if (!units.empty()) return units;
  for (const auto& child : model.children()) {
    if (child->num_parameters() > 0) units.push_back(child);
  }
  return units;
}

// K, the bytes of optimiser state per parameter: Adam's two f32 moments, SGD's momentum buffer.
double state_bytes_per_parameter(const Options& o) {
  if (o.optimizer == "adam") return 8.0;
  return o.train.momentum > 0.0 ? 4.0 : 0.0;
}

// What one mode keeps per rank of Ψ f32 parameters over N ranks (SEMANTICS.md, "Sharded data
// parallel"), with the formula as the page writes it.
struct Formula {
  double bytes = 0;
  std::string text;
};

Formula model_state_formula(const Options& o, double psi, double n) {
  const double k = state_bytes_per_parameter(o);
  const std::string ks = std::to_string(static_cast<int>(k));
  if (o.shard == "zero1") return {(4 + 4) * psi + k * psi / n, "(4+4)Ψ + " + ks + "Ψ/N"};
  if (o.shard == "zero2") return {4 * psi + (4 + k) * psi / n, "4Ψ + (4+" + ks + ")Ψ/N"};
  if (o.shard == "fsdp") return {(4 + 4 + k) * psi / n, "(4+4+" + ks + ")Ψ/N"};
  return {(4 + 4 + k) * psi, "(4+4+" + ks + ")Ψ"};
}

Formula communication_formula(const Options& o, double psi, double n) {
  const double ring = 4 * psi * (n - 1) / n;  // Ψ f32 elements through a ring, per rank
  if (o.shard == "zero1") return {3 * ring, "2Ψ(N-1)/N + Ψ(N-1)/N"};
  if (o.shard == "fsdp" && o.reshard_after_forward) return {3 * ring, "3Ψ(N-1)/N"};
  return {2 * ring, "2Ψ(N-1)/N"};
}

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

// One training set-up per mode: what forward runs, what the optimiser steps, how gradients
// are clipped, and the whole model's parameters at the end.
struct Trainer {
  Module* forward = nullptr;                        // what the loop calls: the DDP wrapper or the model
  std::function<void()> zero_grad, step;
  std::function<double(double max_norm)> clip;      // returns the norm before clipping
  std::function<StateDict()> whole_state;           // every rank the same, unsharded names
};

int run(const Options& o) {
  const DistributedRank started = start_rank(o.rank);
  const Device device = started.choice.device;
  ProcessGroup& group = *started.group;
  const int world = group.size();
  check_ranks_agree(group, device,
                    {shared("--model", o.model), shared("--dataset", o.dataset), shared("--shard", o.shard),
                     shared("--optimizer", o.optimizer), shared("--epochs", o.train.epochs),
                     shared("--max-steps", o.train.max_steps), shared("--batch-size", o.train.batch_size),
                     shared("--lr", o.train.lr), shared("--momentum", o.train.momentum),
                     shared("--seed", o.train.seed), shared("--reshard-after-forward", o.reshard_after_forward),
                     shared("--prefetch", o.prefetch), shared("--amp", o.amp),
                     shared("--clip-grad-norm", o.clip_grad_norm), shared("--eval-images", o.eval_images),
                     shared("--save-every", o.save_every), shared("--checkpoint", o.checkpoint),
                     shared("--resume", o.resume), shared("--trace", o.trace.empty() ? "off" : "on")});
  check_output_file("--trace", o.trace);
  if (group.rank() == 0) check_output_file("--memory-timeline", o.memory_timeline);
  if (!o.trace.empty()) enable_trace();
  check_model_fits_dataset(o.model, o.dataset);
  const TrainTestSets data = load_train_test(o.dataset, o.train.data);
  check_ranks_agree(group, device, {shared("--data (training images)", data.train->size()),
                                    shared("--data (test images)", data.test->size()),
                                    shared("--data (files' contents)", data.fingerprint)});

  // The model, the same on every rank (each mode starts from rank 0's weights).
  manual_seed(o.train.seed);
  const std::shared_ptr<Module> model = make_model(o.model, dataset_channels(o.dataset));
  model->to(device);
  const double psi = static_cast<double>(model->num_parameters());
  auto make_optimizer = [&](std::vector<Tensor> params) -> std::unique_ptr<Optimizer> {
    if (o.optimizer == "adam") return std::make_unique<Adam>(std::move(params), AdamOptions(o.train.lr));
    return std::make_unique<SGD>(std::move(params), SGDOptions(o.train.lr).momentum(o.train.momentum));
  };

  //! [modes]
  // The four ways to keep the model state. DDP and ZeRO-1/2 wrap the model in
  //    DistributedDataParallel; FSDP makes each block a unit, then the whole model.
  Trainer trainer;
  std::shared_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> plain;
  std::unique_ptr<ZeroRedundancyOptimizer> zero1;
  std::unique_ptr<Zero2Optimizer> zero2;
  std::shared_ptr<FSDPModule> root;
  if (o.shard == "fsdp") {
    std::vector<std::shared_ptr<FSDPModule>> units;
    for (const auto& block : units_of(*model)) {
      units.push_back(fully_shard(block, FullyShardOptions().reshard_after_forward(o.reshard_after_forward)));
    }
    root = fully_shard(model);
    if (o.prefetch) {
      // Each block fetches the next one's parameters while it computes, and in backward the
      // one before it.
      for (size_t i = 0; i + 1 < units.size(); ++i) {
        units[i]->set_modules_to_forward_prefetch({units[i + 1]});
        units[i + 1]->set_modules_to_backward_prefetch({units[i]});
      }
    }
    plain = make_optimizer(root->parameters());
    trainer.forward = model.get();
    trainer.zero_grad = [&] { plain->zero_grad(); };
    trainer.step = [&] { plain->step(); };
    trainer.clip = [&](double max_norm) { return root->clip_grad_norm_(max_norm); };
    trainer.whole_state = [&] { return root->full_state_dict(); };
  } else {
    ddp = std::make_shared<DistributedDataParallel>(
        model, DistributedDataParallelOptions().shard_gradients(o.shard == "zero2"));
    trainer.forward = ddp.get();
    if (o.shard == "zero1") {
      zero1 = std::make_unique<ZeroRedundancyOptimizer>(ddp->parameters(), group, make_optimizer);
      trainer.zero_grad = [&] { zero1->zero_grad(); };
      trainer.step = [&] { zero1->step(); };
    } else if (o.shard == "zero2") {
      zero2 = std::make_unique<Zero2Optimizer>(*ddp, make_optimizer);
      trainer.zero_grad = [&] { zero2->zero_grad(); };
      trainer.step = [&] { zero2->step(); };
    } else {
      plain = make_optimizer(ddp->parameters());
      trainer.zero_grad = [&] { plain->zero_grad(); };
      trainer.step = [&] { plain->step(); };
    }
    trainer.clip = [&](double max_norm) {
      // ZeRO-2's gradients are shards; DDP's and ZeRO-1's whole, the same on every rank.
      return zero2 ? clip_grad_norm_(group, zero2->parts(), max_norm) : clip_grad_norm_(ddp->parameters(), max_norm);
    };
    trainer.whole_state = [&] { return model->state_dict(); };
  }
  //! [modes]
  print_rank0("model: " + o.model + ", " + std::to_string(static_cast<long long>(psi)) + " parameters (Ψ), " +
              mib(4 * psi) + " in f32; shard " + o.shard + ", optimizer " + o.optimizer + ", " +
              std::to_string(o.train.batch_size) + " images per rank per step");

  auto sampler = std::make_shared<DistributedSampler>(data.train->size(), world, group.rank(),
                                                      DistributedSamplerOptions().seed(o.train.seed));
  int64_t step = 0, first_epoch = 0;
  //! [resume]
  // A sharded checkpoint, saved at any world size: each rank reads the rows of its new shards,
  //    and the sampler resumes the epoch at the saved global sample count.
  if (!o.resume.empty()) {
    const ShardedResumeInfo info = load_sharded_checkpoint(o.resume, *root, *plain, group);
    step = info.saved.global_step;
    first_epoch = info.saved.epoch;
    sampler->set_seed(info.saved.sampler_seed);
    sampler->resume_at(info.saved.epoch, info.samples_in_epoch);
    print_rank0("resumed from " + o.resume + ": step " + std::to_string(step) + ", epoch " +
                std::to_string(first_epoch + 1) + " after its first " + std::to_string(info.samples_in_epoch) +
                " samples");
    for (const std::string& note : info.notes) print_rank0("  note: " + note);
  }
  //! [resume]
  DataLoader loader(data.train, DataLoaderOptions(o.train.batch_size).sampler(sampler).pin_memory(device.is_cuda()));
  const bool amp = o.amp == "bf16";

  int64_t timed_samples = 0;
  const int64_t first_step = step;
  double timed_seconds = 0.0;
  Tensor loss;
  MemoryLedger last_ledger;
  CommunicationLedger last_sent;
  std::vector<MemorySample> timeline;
  for (int64_t epoch = first_epoch; epoch < o.train.epochs && (o.train.max_steps == 0 || step < o.train.max_steps);
       ++epoch) {
    sampler->set_epoch(epoch);  // after a resume, the same epoch keeps its position
    int64_t done_in_epoch = sampler->start_position() / (o.train.batch_size * world);
    trainer.forward->train();
    for (const Batch& batch : loader) {
      const Tensor inputs = batch.inputs.to(device, true);    // inputs: (B, C, H, W), this rank's
      const Tensor targets = batch.targets.to(device, true);  // targets: (B)
      const bool last = o.train.max_steps > 0 && step + 1 == o.train.max_steps;
      //! [step]
      // One step, measured: the ledger's peaks and the bytes sent start again from here.
      reset_memory_ledger_peaks(device);
      group.reset_communication_ledger();
      if (last && !o.memory_timeline.empty()) start_memory_timeline(device);
      Timer timer;
      trainer.zero_grad();
      {
        const AutocastGuard autocast(device.type(), DType::bf16, amp);
        loss = cross_entropy((*trainer.forward)(inputs), targets);
      }
      loss.backward();
      if (o.clip_grad_norm > 0) trainer.clip(o.clip_grad_norm);
      trainer.step();
      //! [step]
      loss.item();  // wait for the device, so that the time is the step's
      if (last && !o.memory_timeline.empty()) timeline = stop_memory_timeline();
      // The first step allocates the optimiser's state and warms the caches: timed from the second.
      if (step > first_step) {
        timed_seconds += timer.seconds();
        timed_samples += targets.numel();
      }
      last_ledger = memory_ledger(device);
      last_sent = group.communication_ledger();
      ++step;
      ++done_in_epoch;
      if (o.save_every > 0 && step % o.save_every == 0) {
        ShardedTrainingPosition position;
        position.epoch = epoch;
        position.step_in_epoch = done_in_epoch;
        position.global_step = step;
        position.batch_size = o.train.batch_size;
        position.sampler_seed = sampler->seed();
        save_sharded_checkpoint(o.checkpoint, *root, *plain, position, group);
        print_rank0("step " + std::to_string(step) + ": sharded checkpoint written to " + o.checkpoint + "/");
      }
      char line[200];
      std::snprintf(line, sizeof line, "step %lld: loss %.4f, %.0f ms, model state peak %s, sent %s",
                    static_cast<long long>(step), loss.item(), timer.seconds() * 1e3,
                    mib(static_cast<double>(last_ledger.peak_model_state)).c_str(), mib(last_sent.total_bytes()).c_str());
      print_rank0(line);
      if (o.train.max_steps > 0 && step >= o.train.max_steps) break;
    }
  }
  LOCKSTEP_CHECK_AGREED(loss.defined(), "nothing left to train: the checkpoint is at step ", step,
                        ", and the run ends at --max-steps ", o.train.max_steps, " or --epochs ", o.train.epochs);
  check_training_loss(loss.item(), 1, step, static_cast<int>(o.train.epochs));

  //! [ledger]
  // Each rank's ledger of the last step beside the formulas: the peaks of each category,
  //    the model state's peak (parameters, gradients, optimiser state and gathered parameters
  //    at the moment they were largest together), and the bytes sent.
  std::string peaks = "memory of step " + std::to_string(step) + ", peak per category:";
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    peaks += std::string(c ? "," : "") + " " + memory_category_name(static_cast<MemoryCategory>(c)) + " " +
             mib(static_cast<double>(last_ledger.peak[c]));
  }
  log_rank(peaks);
  // The datasets, loaded whole, are part of "activations and other" from the start.
  const double dataset_bytes = static_cast<double>(data.train->inputs().nbytes() + data.train->targets().nbytes() +
                                                   data.test->inputs().nbytes() + data.test->targets().nbytes());
  log_rank("(of activations and other, " + mib(dataset_bytes) + " is the dataset in memory)");
  const Formula state = model_state_formula(o, psi, world);
  log_rank("model state peak " + mib(static_cast<double>(last_ledger.peak_model_state)) + "; formula " + state.text +
           " = " + mib(state.bytes) + (o.shard == "fsdp" ? ", plus the units gathered at the moment" : ""));
  const Formula sent = communication_formula(o, psi, world);
  std::string by_op;
  for (const auto& [op, bytes] : last_sent.bytes) {
    by_op += (by_op.empty() ? "" : ", ") + op + " " + std::to_string(last_sent.calls.at(op)) + "x " + mib(bytes);
  }
  log_rank("sent in step " + std::to_string(step) + ": " + by_op + " = " + mib(last_sent.total_bytes()) +
           "; formula " + sent.text + " = " + mib(sent.bytes));
  //! [ledger]
  if (group.rank() == 0 && !o.memory_timeline.empty()) {
    std::ofstream csv(o.memory_timeline);
    csv << "seconds";
    for (int c = 0; c < kMemoryCategoryCount; ++c) csv << "," << memory_category_name(static_cast<MemoryCategory>(c));
    csv << "\n";
    for (const MemorySample& sample : timeline) {
      csv << sample.seconds;
      for (int64_t bytes : sample.bytes) csv << "," << bytes;
      csv << "\n";
    }
    print_rank0("memory timeline of step " + std::to_string(step) + ": " + std::to_string(timeline.size()) +
                " samples written to " + o.memory_timeline);
  }

  // The whole model's weights, every rank's checksum: the same on every rank, and the same
  // in every mode that adds in the same order.
  const uint64_t checksum = weights_checksum(*model, trainer.whole_state());
  log_rank("weights checksum " + checksum_hex(checksum));
  Evaluation result;
  result.accuracy = std::nan("");  // no evaluation asked for
  if (o.eval_images != 0) {
    const int64_t n = o.eval_images < 0 ? data.test->size() : std::min<int64_t>(o.eval_images, data.test->size());
    auto test = std::make_shared<TensorDataset>(data.test->inputs().slice(0, 0, n), data.test->targets().slice(0, 0, n));
    result = evaluate(*trainer.forward, test, group, device);
  }
  if (!o.trace.empty()) {
    const int64_t spans = export_chrome_trace(o.trace, cpu_process_group());
    print_rank0("trace: " + std::to_string(spans) + " spans of " + std::to_string(world) + " rank(s) written to " +
                o.trace + " (open it in https://ui.perfetto.dev)");
  }
  const Throughput speed = all_rank_throughput(timed_samples, timed_seconds, loss, group, device);
  print_rank0(ResultLine(8).add("model", o.model).add("device", device.is_cuda() ? "cuda" : "cpu").add("world", world)
                  .add("epochs", o.train.epochs).add("steps", step).add("batch", o.train.batch_size)
                  .add("samples_per_s", speed.samples_per_s).add("test_acc", result.accuracy)
                  .add("final_loss", speed.mean_loss).add("shard", o.shard).add("optimizer", o.optimizer)
                  .add("parameters", static_cast<int64_t>(psi)).add("peak_bytes", last_ledger.peak_total).add("model_state_bytes", last_ledger.peak_model_state)
                  .add("comm_bytes_per_step", static_cast<int64_t>(std::llround(last_sent.total_bytes())))
                  .add("checksum", checksum_hex(checksum)).add("backend", group.backend_name()).str());
  destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 8: sharded data parallelism, ZeRO-1, ZeRO-2 and FSDP, with the memory and communication "
               "ledgers (run with mpirun -n N)",
               "chapter8");
  Options o;
  app.option_defaults()->always_capture_default();
  add_model_and_dataset_options(app, o.model, o.dataset);
  app.add_option("--shard", o.shard,
                 "none (DDP), zero1 (ZeroRedundancyOptimizer), zero2 (gradients reduce-scattered too) or fsdp "
                 "(fully_shard: parameters too)")
      ->check(CLI::IsMember({"none", "zero1", "zero2", "fsdp"}));
  app.add_option("--optimizer", o.optimizer, "adam or sgd (with --momentum)")->check(CLI::IsMember({"sgd", "adam"}));
  add_train_flags(app, o.train, "images per rank per step", SeedUse::one_process);
  app.add_option("--reshard-after-forward", o.reshard_after_forward,
                 "fsdp: free each block's parameters after its forward and gather them again for its backward (false: "
                 "keep them, one all-gather fewer for ZeRO-2's memory)");
  app.add_option("--prefetch", o.prefetch, "fsdp: gather the next block's parameters while the current one computes");
  app.add_option("--amp", o.amp, "off, or bf16 autocast as in chapter 5")->check(CLI::IsMember({"off", "bf16"}));
  app.add_option("--clip-grad-norm", o.clip_grad_norm,
                 "scale the gradients so that their norm, over the whole model, is at most this (0: no clipping)")
      ->check(non_negative_number());
  app.add_option("--eval-images", o.eval_images,
                 "evaluate on the first N test images at the end (0: no evaluation, -1: the whole test set)")
      ->check(number_between(-1, 1e9));
  app.add_option("--save-every", o.save_every,
                 "fsdp: write a sharded checkpoint every N steps into the folder --checkpoint (0: never)")
      ->check(non_negative_number());
  app.add_option("--checkpoint", o.checkpoint, "the folder --save-every writes: a shard per rank and an index");
  app.add_option("--resume", o.resume, "fsdp: go on from this sharded checkpoint, saved by any number of ranks");
  app.add_option("--memory-timeline", o.memory_timeline,
                 "write rank 0's memory ledger over the last step, a sample at every allocation and free, as CSV");
  app.add_option("--trace", o.trace, "write every rank's timeline (Chrome trace JSON, for ui.perfetto.dev) to this file");
  add_rank_flags(app, o.rank);
  return run_program(app, argc, argv, [&] {
    LOCKSTEP_CHECK(o.optimizer == "sgd" || app.count("--momentum") == 0, "--momentum ", o.train.momentum,
                   " is SGD's, and --optimizer adam has none: leave --momentum out, or train with --optimizer sgd");
    LOCKSTEP_CHECK(o.shard == "fsdp" || (app.count("--reshard-after-forward") == 0 && app.count("--prefetch") == 0),
                   "--reshard-after-forward and --prefetch are FSDP's: they need --shard fsdp");
    LOCKSTEP_CHECK(o.shard == "fsdp" || (o.save_every == 0 && o.resume.empty()),
                   "--save-every and --resume write and read sharded checkpoints, which are FSDP's: use --shard fsdp "
                   "(chapter 6 saves and resumes DDP's whole checkpoints)");
    return run(o);
  });
}
