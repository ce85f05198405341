// Chapter 2: training on one device — the baseline every later chapter is measured against.
// Run: make chapter2 && ./chapter2 --model cnn --epochs 2
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "common/device_choice.h"
#include "common/graphed_step.h"
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
  std::string optimizer = "sgd";
  TrainFlags train;                    // --lr: 0.05 for sgd, 1e-3 for adam and adamw unless given
  std::optional<double> weight_decay;  // default: the optimiser's own (0; 1e-2 for adamw)
  int threads = 0;
  bool cuda_graph = false;
  std::string save;
  std::string trace;
  std::string metrics;
  std::string load;
};

struct Evaluation {
  double accuracy = 0.0;
  double loss = 0.0;
};

//! [evaluate]
// Accuracy and mean loss on a whole dataset, without recording a graph. The sums stay on the
// device and are read once at the end: reading a GPU value makes the CPU wait for the GPU.
Evaluation evaluate(Module& model, const std::shared_ptr<const Dataset>& dataset, Device device) {
  model.eval();
  NoGradGuard no_grad;
  DataLoader loader(dataset, DataLoaderOptions(1000).pin_memory(device.is_cuda()));
  const Tensor correct = zeros({}, TensorOptions().device(device)), loss_sum = zeros({}, TensorOptions().device(device));
  for (const Batch& batch : loader) {
    const Tensor inputs = batch.inputs.to(device, true), targets = batch.targets.to(device, true);
    const Tensor logits = model(inputs);                      // logits: (B, 10)
    loss_sum.add_(cross_entropy(logits, targets), static_cast<double>(targets.numel()));  // mean * B
    correct.add_(sum(eq(argmax(logits, 1), targets).to(DType::f32)));
  }
  const auto n = static_cast<double>(dataset->size());
  return {correct.item() / n, loss_sum.item() / n};
}
//! [evaluate]

std::unique_ptr<Optimizer> make_optimizer(const Options& o, const std::vector<Tensor>& params) {
  const double lr = o.train.lr;
  if (o.optimizer == "sgd") {
    return std::make_unique<SGD>(
        params, SGDOptions(lr).momentum(o.train.momentum).weight_decay(o.weight_decay.value_or(0.0)));
  }
  // Adam and AdamW differ in their default weight decay: pass it only when the flag was given.
  AdamOptions options(lr);
  if (o.weight_decay) options.weight_decay(*o.weight_decay);
  if (o.optimizer == "adam") return std::make_unique<Adam>(params, options);
  return std::make_unique<AdamW>(params, options);
}

// Mistakes that would otherwise surface only after loading data or, for --save, after training.
void check_options(const Options& o) {
  check_model_fits_dataset(o.model, o.dataset);
  check_output_file("--save", o.save);
  check_output_file("--trace", o.trace);
  check_input_file("--load", o.load);
  // Adam's step count lives on the host, in the bias correction the capture recorded: every
  // replay would repeat that one step's correction (PyTorch's capturable=True keeps it on the GPU).
  LOCKSTEP_CHECK(!o.cuda_graph || o.optimizer == "sgd", "--cuda-graph works with --optimizer sgd only: ", o.optimizer,
                 "'s step count lives on the host, and every replay would repeat the captured step's value");
  // A replay runs none of the host code that records the trace's spans.
  LOCKSTEP_CHECK(!(o.cuda_graph && !o.trace.empty()), "--cuda-graph and --trace cannot go together: a replayed "
                 "CUDA graph runs none of the host code that records the timeline; drop one of them");
}

int run(const Options& o) {
  check_options(o);
  StepMetrics metrics(o.metrics);
  if (o.threads > 0) set_num_threads(o.threads);
  const DeviceChoice choice = resolve_device(o.device, 0, 1);
  const Device device = choice.device;
  LOCKSTEP_CHECK(!o.cuda_graph || device.is_cuda(), "--cuda-graph records the training step as a CUDA graph, which "
                 "needs a GPU; this run is on ", device, ": use --device cuda, or drop --cuda-graph");
  std::cout << choice.start_line() << "\n";
  // Fail early, before loading data, when the device cannot be used.
  empty({1}, TensorOptions().device(device));
  manual_seed(o.train.seed);

  // Data: normalised images in memory, (N, C, H, W) with labels (N).
  // Fashion-MNIST is found in the usual places; CIFAR-10 (3 x 32 x 32, for the ResNet) has no
  // Debian package, so it needs --data.
  const TrainTestSets data = load_train_test(o.dataset, o.train.data);
  std::cout << "reading " << data.directory << "\n";
  const auto& train_set = data.train;
  const auto& test_set = data.test;
  std::cout << "data: " << o.dataset << " (" << train_set->size() << " training, " << test_set->size()
            << " test images)\n";

  // Model and optimiser.
  std::shared_ptr<Module> model = make_model(o.model, dataset_channels(o.dataset));
  if (!o.load.empty()) model->load_state_dict(load_safetensors(o.load));
  model->to(device);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(o, model->parameters());
  // A timeline of the run for ui.perfetto.dev: each autograd node, the optimiser step, the
  // DataLoader's batches (see chapter 4, section 9).
  if (!o.trace.empty()) enable_trace();
  std::cout << "model: " << o.model << " (" << model->num_parameters() << " parameters) on " << device << ", "
            << get_num_threads() << " thread(s), batch " << o.train.batch_size << ", " << o.optimizer << " lr "
            << o.train.lr << "\n";

  //! [loop]
  // The training loop: forward, loss, backward, step — once per batch. On a GPU the batches
  // come in pinned memory, and their copies are only queued: the CPU goes on to queue the
  // forward pass while the copy runs, and the GPU runs both in order.
  DataLoader loader(train_set, DataLoaderOptions(o.train.batch_size)
                                   .sampler(std::make_shared<RandomSampler>(train_set->size(), o.train.seed))
                                   .pin_memory(device.is_cuda()));
  // One training step: forward, loss, backward, step. With --cuda-graph it is recorded once and
  // replayed for each batch (common/graphed_step.h): one launch instead of hundreds.
  const GraphedStep::Step train_step = [&](const Tensor& inputs, const Tensor& targets) {
    const Tensor loss = cross_entropy((*model)(inputs), targets);
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
    return loss;
  };
  std::optional<GraphedStep> graphed;
  if (o.cuda_graph) graphed.emplace(train_step);
  int64_t step = 0, samples = 0;
  double train_seconds = 0.0, last_loss = NAN;
  Evaluation result;
  // What the steps' matrix products could do at best: MFU is the fraction of it they achieve.
  const double peak_flops = rank_peak_flops(device, DType::f32, get_num_threads());
  TrainingFlops flops;
  int epoch = 0;
  while (epoch < o.train.epochs && (o.train.max_steps == 0 || step < o.train.max_steps)) {
    ++epoch;
    model->train();
    ProgressBar bar("epoch " + std::to_string(epoch), static_cast<int64_t>(loader.size()));
    // The progress bar shows the mean loss of the last kProgressSteps steps, summed on the
    // device: loss.item() every step would make the CPU wait for the GPU every step.
    const int64_t kProgressSteps = 20;
    const Tensor window_loss = zeros({}, TensorOptions().device(device));
    Tensor loss;
    Timer timer;
    flops.start();
    int64_t batch_index = 0, epoch_samples = 0;
    for (const Batch& batch : loader) {
      const Tensor inputs = batch.inputs.to(device, true);    // inputs: (B, C, H, W)
      const Tensor targets = batch.targets.to(device, true);  // targets: (B) class indices
      loss = graphed ? (*graphed)(inputs, targets) : train_step(inputs, targets);
      window_loss.add_(loss.detach());
      epoch_samples += targets.numel();
      ++step;
      ++batch_index;
      metrics.record(step, epoch, loss, timer);
      if (batch_index % kProgressSteps == 0) {
        // Read for the bar, the window's loss is checked too: a diverged run stops at the
        // first window whose loss is inf or NaN, without a wait of its own.
        const double window_sum = window_loss.item();
        check_training_loss(window_sum, kProgressSteps, step, epoch);
        char status[64];
        std::snprintf(status, sizeof status, "loss %.4f", window_sum / kProgressSteps);
        window_loss.zero_();
        bar.update(batch_index, status);
      }
      if (o.train.max_steps > 0 && step >= o.train.max_steps) break;
    }
    // Reading the last loss waits for the GPU to finish the epoch's work, so the time is the
    // time the work took, not the time it took to queue it.
    last_loss = loss.item();
    const double epoch_seconds = timer.seconds();
    const int64_t epoch_flops = flops.stop();
    // The steps after the last full window, now that the device has finished them.
    check_training_loss(window_loss.item(), batch_index % kProgressSteps, step, epoch);
    train_seconds += epoch_seconds;
    samples += epoch_samples;
    bar.finish();
    result = evaluate(*model, test_set, device);
    const double epoch_speed = static_cast<double>(epoch_samples) / epoch_seconds;
    std::printf("epoch %d: train_loss %.4f test_loss %.4f test_acc %.4f epoch_s %.2f samples_per_s %.0f mfu %.3f\n",
                epoch, last_loss, result.loss, result.accuracy, epoch_seconds, epoch_speed,
                model_flops(epoch_flops, epoch_samples, epoch_speed, peak_flops).mfu);
  }
  //! [loop]
  if (graphed) std::cout << "cuda graph: " << graphed->replays() << " of " << step << " steps replayed\n";

  if (!o.save.empty()) {
    // The file holds CPU tensors, so that it loads on any machine, with or without a GPU.
    StateDict state = model->state_dict();
    for (auto& [name, tensor] : state) tensor = tensor.to(Device::cpu());
    save_safetensors(o.save, state);
    std::cout << "saved " << o.save << "\n";
  }
  if (!o.trace.empty()) {
    const int64_t spans = save_trace(o.trace, "chapter2");
    std::cout << "trace: " << spans << " spans written to " << o.trace
              << " (open it in https://ui.perfetto.dev)\n";
  }
  const double samples_per_s = static_cast<double>(samples) / train_seconds;
  const ModelFlops mfu = model_flops(flops.total(), samples, samples_per_s, peak_flops);
  std::cout << ResultLine(2).add("model", o.model).add("device", device.str()).add("world", 1).add("epochs", epoch)
                   .add("batch", o.train.batch_size).add("samples_per_s", samples_per_s)
                   .add("epoch_s", train_seconds / epoch).add("test_acc", result.accuracy).add("final_loss", last_loss)
                   .add("threads", get_num_threads()).add("flops_per_sample", mfu.per_sample).add("mfu", mfu.mfu)
                   .add("peak_bytes", memory_ledger(device).peak_total).str()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Chapter 2: training on one device (Fashion-MNIST)", "chapter2");
  Options o;
  app.option_defaults()->always_capture_default();
  add_model_and_dataset_options(app, o.model, o.dataset);
  app.add_option("--device", o.device, "auto (cuda:0 when there is a GPU, else cpu), cpu, cuda or cuda:N");
  add_train_flags(app, o.train, "samples per step", SeedUse::one_process);
  app.add_option("--optimizer", o.optimizer, "sgd, adam or adamw (adam and adamw: --lr 1e-3 unless given)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  app.add_option("--weight-decay", o.weight_decay, "weight decay (default: 0; 1e-2 for adamw)")->check(non_negative_number());
  app.add_option("--threads", o.threads, "CPU threads (default: all cores)")->check(thread_count());
  app.add_flag("--cuda-graph", o.cuda_graph, "on a GPU: record the training step once as a CUDA graph and replay it "
                                             "for each batch (after 3 eager steps)");
  app.add_option("--save", o.save, "write the trained weights to this safetensors file");
  app.add_option("--trace", o.trace, "write a timeline of the run (Chrome trace JSON, for ui.perfetto.dev) to this "
                                     "file; use with --max-steps, it grows with every step");
  add_metrics_flag(app, o.metrics);
  app.add_option("--load", o.load, "start from the weights in this safetensors file");
  return run_program(app, argc, argv, [&] {
    // Adam and AdamW start from PyTorch's default learning rate for them, unless --lr was given.
    if (app.count("--lr") == 0 && o.optimizer != "sgd") o.train.lr = 1e-3;
    return run(o);
  });
}
