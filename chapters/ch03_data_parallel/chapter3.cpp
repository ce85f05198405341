// Chapter 3: DataParallel — one process, several replicas of the model, and where its time goes.
// Run: make chapter3 && ./chapter3 --replicas 2
#include <cmath>
#include <cstdio>
#include <iostream>

#include "common/device_choice.h"
#include "common/model_flops.h"
#include "common/named_datasets.h"
#include "common/program.h"
#include "common/progress.h"
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
  std::string device = "auto";
  int replicas = 2;
  TrainFlags train;
  int threads = 0;
  int64_t baseline_steps = 50;
  std::string trace;
  std::string metrics;
};

// The replicas' devices: N times the CPU; on GPUs (cuda, or auto on a machine with one) one
// each while there are enough (cuda:0, cuda:1, ...), then sharing them round-robin; an explicit
// cuda:K puts every replica there.
std::vector<Device> replica_devices(const Options& o, Device device) {
  std::vector<Device> devices;
  const bool spread = device.is_cuda() && (o.device == "cuda" || o.device == "auto");
  for (int i = 0; i < o.replicas; ++i) {
    devices.push_back(spread ? Device::cuda(i % std::max(1, cuda_device_count())) : device);
  }
  return devices;
}

// Waits for the work queued on `devices`, so that a clock read afterwards measures the work and
// not only its queueing (nothing to wait for on the CPU).
void wait_for(const std::vector<Device>& devices) {
  for (const Device device : devices) {
    if (device.is_cuda()) cuda::synchronize(device);
  }
}

// The seconds spent in each phase of the training steps, summed.
struct StepTimes {
  double scatter = 0, replicate = 0, forward = 0, gather = 0, loss = 0, backward = 0, reduce = 0, step = 0;
  int64_t steps = 0;
  double total() const { return scatter + replicate + forward + gather + loss + backward + step; }
};

// A stopwatch for consecutive phases: lap(slot) waits for the devices, adds the time since the
// previous lap to `slot` (unless told not to count) and starts the next phase.
class Laps {
 public:
  explicit Laps(std::vector<Device> devices) : devices_(std::move(devices)) {}
  void lap(double& slot, bool count = true) {
    wait_for(devices_);
    if (count) slot += timer_.seconds();
    timer_.reset();
  }

 private:
  std::vector<Device> devices_;
  Timer timer_;
};

//! [baseline]
// Chapter 2's step on one device, timed phase by phase, on the first batches of the same data
// (round again, when the data holds fewer) and from the same initial weights, for comparison.
// The first steps warm up caches and memory pools and are not counted.
StepTimes time_single_device(const Options& o, const std::shared_ptr<const Dataset>& train_set, Device device) {
  const int64_t warmup_steps = 5;
  manual_seed(o.train.seed);
  std::shared_ptr<Module> model = make_model(o.model, dataset_channels(o.dataset));
  model->to(device);
  SGD optimizer(model->parameters(), SGDOptions(o.train.lr).momentum(o.train.momentum));
  DataLoader loader(train_set, DataLoaderOptions(o.train.batch_size)
                                   .sampler(std::make_shared<RandomSampler>(train_set->size(), o.train.seed))
                                   .pin_memory(device.is_cuda()));
  StepTimes t;
  int64_t index = 0;
  while (t.steps < o.baseline_steps) {
    for (const Batch& batch : loader) {
      if (t.steps == o.baseline_steps) break;
      const bool count = index++ >= warmup_steps;
      Laps laps({device});
      const Tensor inputs = batch.inputs.to(device, true), targets = batch.targets.to(device, true);
      laps.lap(t.scatter, count);  // the inputs' way to the device
      const Tensor logits = (*model)(inputs);
      laps.lap(t.forward, count);
      const Tensor loss = cross_entropy(logits, targets);
      laps.lap(t.loss, count);
      optimizer.zero_grad();
      loss.backward();
      laps.lap(t.backward, count);
      optimizer.step();
      laps.lap(t.step, count);
      if (count) ++t.steps;
    }
  }
  return t;
}
//! [baseline]

//! [evaluate]
// Test accuracy through the DataParallel wrapper: the test batches are scattered over the
// replicas too, and the gathered logits compared with the labels on the output device.
double evaluate(DataParallel& model, const std::shared_ptr<const Dataset>& test_set) {
  model.eval();
  NoGradGuard no_grad;
  const Device device = model.output_device();
  DataLoader loader(test_set, DataLoaderOptions(1000).pin_memory(device.is_cuda()));
  const Tensor correct = zeros({}, TensorOptions().device(device));
  for (const Batch& batch : loader) {
    const Tensor logits = model(batch.inputs);  // logits: (B, 10) on the output device
    correct.add_(sum(eq(argmax(logits, 1), batch.targets.to(device, true)).to(DType::f32)));
  }
  return correct.item() / static_cast<double>(test_set->size());
}
//! [evaluate]

void print_breakdown(const StepTimes& single, const StepTimes& parallel, Device device, const std::vector<Device>& devices,
                     int64_t batch) {
  const auto ms = [](double seconds, int64_t steps) { return steps > 0 ? 1e3 * seconds / static_cast<double>(steps) : 0.0; };
  std::printf("\ntime per step in ms (batch %lld):  one %s   DataParallel %zu replicas", static_cast<long long>(batch),
              device.str().c_str(), devices.size());
  std::printf("\n  (averaged over %lld and %lld steps; every phase waits for its devices before its clock stops)\n",
              static_cast<long long>(single.steps), static_cast<long long>(parallel.steps));
  const struct {
    const char* name;
    double a, b;
    bool single_has_it;
  } rows[] = {{"scatter (inputs)", single.scatter, parallel.scatter, true},
              {"replicate", single.replicate, parallel.replicate, false},
              {"forward", single.forward, parallel.forward, true},
              {"gather", single.gather, parallel.gather, false},
              {"loss", single.loss, parallel.loss, true},
              {"backward", single.backward, parallel.backward, true},
              {"  of which reduce", single.reduce, parallel.reduce, false},
              {"optimizer step", single.step, parallel.step, true},
              {"total", single.total(), parallel.total(), true}};
  for (const auto& row : rows) {
    if (row.single_has_it) {
      std::printf("  %-18s %10.2f %10.2f\n", row.name, ms(row.a, single.steps), ms(row.b, parallel.steps));
    } else {
      std::printf("  %-18s %10s %10.2f\n", row.name, "-", ms(row.b, parallel.steps));
    }
  }
  std::printf("  DataParallel / one device: %.2fx the time per step\n\n",
              ms(parallel.total(), parallel.steps) / ms(single.total(), single.steps));
}

int run(const Options& o) {
  check_model_fits_dataset(o.model, o.dataset);
  check_output_file("--trace", o.trace);
  StepMetrics metrics(o.metrics);
  if (o.threads > 0) set_num_threads(o.threads);
  const DeviceChoice choice = resolve_device(o.device, 0, 1);
  std::cout << choice.start_line() << "\n";
  const std::vector<Device> devices = replica_devices(o, choice.device);
  // Fail early, before loading data, when a device cannot be used.
  for (const Device device : devices) empty({1}, TensorOptions().device(device));

  // Data: Fashion-MNIST (or CIFAR-10) in memory, as in chapter 2.
  const TrainTestSets data = load_train_test(o.dataset, o.train.data);
  std::cout << "reading " << data.directory << "\n";
  const std::shared_ptr<const Dataset> train_set = data.train, test_set = data.test;
  std::cout << "data: " << o.dataset << " (" << train_set->size() << " training, " << test_set->size()
            << " test images)\n";
  std::cout << "replicas:";
  for (const Device device : devices) std::cout << " " << device;
  if (devices[0].is_cpu()) {
    std::cout << " (" << get_num_threads() << " CPU thread(s), " << cpu_threads_per_replica(devices) << " per replica)";
  }
  std::cout << "\n";

  // The baseline: chapter 2's single-device step on the same batches.
  const StepTimes single = time_single_device(o, train_set, devices[0]);

  //! [wrap]
  // The model, built from the same seed, lives on devices[0]; DataParallel wraps it. The
  //    optimiser gets the wrapper's parameters(), which are the model's own: the replicas'
  //    copies are made afresh every step and never seen by the optimiser.
  manual_seed(o.train.seed);
  std::shared_ptr<Module> model = make_model(o.model, dataset_channels(o.dataset));
  model->to(devices[0]);
  DataParallel parallel(model, devices);
  parallel.set_profiling(true);
  SGD optimizer(parallel.parameters(), SGDOptions(o.train.lr).momentum(o.train.momentum));
  //! [wrap]
  std::cout << "model: " << o.model << " (" << model->num_parameters() << " parameters), batch " << o.train.batch_size
            << " split over " << devices.size() << " replicas, sgd lr " << o.train.lr << "\n";

  // A timeline of DataParallel's training and evaluation (not of the baseline above): scatter,
  // replicate, parallel_apply with each replica's forward on its own thread's row, gather, and
  // the one backward pass through every replica.
  if (!o.trace.empty()) enable_trace();

  // Training: the loop is chapter 2's; only the model is the wrapper.
  DataLoader loader(train_set, DataLoaderOptions(o.train.batch_size)
                                   .sampler(std::make_shared<RandomSampler>(train_set->size(), o.train.seed))
                                   .pin_memory(devices[0].is_cuda()));
  const Device output = parallel.output_device();
  StepTimes times;
  int64_t step = 0, samples = 0;
  double train_seconds = 0.0, last_loss = NAN, accuracy = 0.0;
  // MFU's peak: every GPU replica's, or the CPU threads' that the replicas share.
  const double peak_flops = devices[0].is_cuda()
                                ? rank_peak_flops(devices[0], DType::f32, 1) * static_cast<double>(devices.size())
                                : rank_peak_flops(devices[0], DType::f32, get_num_threads());
  TrainingFlops flops;
  int epoch = 0;
  while (epoch < o.train.epochs && (o.train.max_steps == 0 || step < o.train.max_steps)) {
    ++epoch;
    parallel.train();
    parallel.reset_times();
    ProgressBar bar("epoch " + std::to_string(epoch), static_cast<int64_t>(loader.size()));
    Tensor loss;
    Timer epoch_timer;
    flops.start();
    int64_t batch_index = 0, epoch_samples = 0;
    for (const Batch& batch : loader) {
      //! [step]
      // The inputs stay where the loader made them: scatter sends each replica its rows. The
      // targets go to the output device, where the gathered logits are.
      const Tensor targets = batch.targets.to(output, true);
      const Tensor logits = parallel(batch.inputs);  // scatter, replicate, parallel_apply, gather
      Laps laps(devices);
      loss = cross_entropy(logits, targets);
      laps.lap(times.loss);
      optimizer.zero_grad();
      loss.backward();  // through every replica; autograd sums their gradients into the model's
      laps.lap(times.backward);
      optimizer.step();
      laps.lap(times.step);
      //! [step]
      epoch_samples += targets.numel();
      ++step;
      metrics.record(step, epoch, loss, epoch_timer);
      // Laps has waited for the devices after every phase, so reading the loss costs no wait
      // here: every step's loss is checked, and a diverged run stops at its very step.
      check_training_loss(loss.item(), 1, step, epoch);
      if (++batch_index % 20 == 0) bar.update(batch_index, "");
      if (o.train.max_steps > 0 && step >= o.train.max_steps) break;
    }
    last_loss = loss.item();
    const double epoch_seconds = epoch_timer.seconds();
    const int64_t epoch_flops = flops.stop();
    train_seconds += epoch_seconds;
    samples += epoch_samples;
    bar.finish();
    // The wrapper's own phases of this epoch (before evaluation adds its forward passes).
    const DataParallelTimes phases = parallel.times();
    times.scatter += phases.scatter;
    times.replicate += phases.replicate;
    times.forward += phases.forward;
    times.gather += phases.gather;
    times.reduce += phases.reduce;
    times.steps += phases.steps;
    accuracy = evaluate(parallel, test_set);
    const double epoch_speed = static_cast<double>(epoch_samples) / epoch_seconds;
    std::printf("epoch %d: train_loss %.4f test_acc %.4f epoch_s %.2f samples_per_s %.0f mfu %.3f\n", epoch, last_loss,
                accuracy, epoch_seconds, epoch_speed, model_flops(epoch_flops, epoch_samples, epoch_speed, peak_flops).mfu);
  }

  if (!o.trace.empty()) {
    const int64_t spans = save_trace(o.trace, "chapter3");
    std::cout << "trace: " << spans << " spans written to " << o.trace
              << " (open it in https://ui.perfetto.dev)\n";
  }
  print_breakdown(single, times, devices[0], devices, o.train.batch_size);
  const double samples_per_s = static_cast<double>(samples) / train_seconds;
  const ModelFlops mfu = model_flops(flops.total(), samples, samples_per_s, peak_flops);
  std::cout << ResultLine(3).add("model", o.model).add("device", devices[0].str()).add("world", 1)
                   .add("replicas", static_cast<int>(devices.size())).add("epochs", epoch)
                   .add("batch", o.train.batch_size)
                   .add("samples_per_s", samples_per_s)
                   .add("epoch_s", train_seconds / epoch).add("test_acc", accuracy).add("final_loss", last_loss)
                   .add("step_ms", 1e3 * times.total() / static_cast<double>(times.steps))
                   .add("single_step_ms", 1e3 * single.total() / static_cast<double>(single.steps))
                   .add("threads", get_num_threads()).add("flops_per_sample", mfu.per_sample).add("mfu", mfu.mfu)
                   .add("peak_bytes", memory_ledger(devices[0]).peak_total).str()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 3: DataParallel, one process driving several replicas (Fashion-MNIST or CIFAR-10)", "chapter3");
  Options o;
  app.option_defaults()->always_capture_default();
  add_model_and_dataset_options(app, o.model, o.dataset);
  app.add_option("--device", o.device, "auto (cuda when there is a GPU, else cpu), cpu (replicas on threads), cuda "
                                       "(one GPU per replica while there are enough, then shared) or cuda:N (every "
                                       "replica on GPU N)");
  app.add_option("--replicas", o.replicas, "replicas of the model; each gets a slice of every batch")->check(CLI::Range(1, 64));
  add_train_flags(app, o.train, "samples per step, split among the replicas", SeedUse::one_process);
  app.add_option("--threads", o.threads, "CPU threads, shared out among the CPU replicas, at least one each (default: all cores)")->check(thread_count());
  app.add_option("--baseline-steps", o.baseline_steps, "single-device steps timed for comparison")->check(positive_number());
  app.add_option("--trace", o.trace, "write a timeline of the DataParallel run (Chrome trace JSON, for "
                                     "ui.perfetto.dev) to this file; use with --max-steps, it grows with every step");
  add_metrics_flag(app, o.metrics);
  return run_program(app, argc, argv, [&] { return run(o); });
}
