/// \file
/// ResNet-50's convolutions on the CPU, layer by layer, against the machine's peak: the
/// roofline report of chapter 2's CNN (cnn_roofline.cpp) for the results table's model. Every
/// distinct convolution of make_model("resnet50", 1) on a batch of Fashion-MNIST-sized images,
/// timed forward and backward (the input's and the weight's gradient, through conv2d and
/// autograd, as a training step runs them), with its flops (every tap of the filter, as the
/// model's flop count has them), its GFLOP/s and its fraction of the f32 peak
/// (cpu::core_peak_flops times the threads). Convolutions do nearly all of the model's
/// arithmetic; the last lines set their sum beside a whole training step of the model.
/// With `--amp bf16` the convolutions run on bf16 operands (as autocast runs them, sums in f32)
/// against the bf16 peak, and the whole step runs its forward pass under bf16 autocast.
///
///     build/tests/resnet50_layers [--threads 1] [--batch-size 256] [--image-size 28] [--reps 3]
///                                 [--amp off|bf16]
///
/// Rows are named after the model's modules; `xN` is how many of the model's convolutions have
/// that row's shape (layer2.1-3.conv1 stands for three blocks). Times are the median of --reps
/// repetitions, the rows taking turns. Ends with a RESULT line.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/program.h"
#include "lockstep.h"
#include "tensor/ops/cpu/peak_flops.h"

namespace {

using namespace lockstep;

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 1;
  int64_t batch = 256;
  int64_t image_size = 28;
  int reps = 3;
  std::string amp = "off";  // "bf16": the convolutions in bf16, the step under autocast
  DType dtype() const { return amp == "bf16" ? DType::bf16 : DType::f32; }
};

// One distinct convolution of the model: the shape of its input (batch, in, size, size) and of
// its filter, and how many of the model's convolutions share it.
struct ConvRow {
  std::string name;
  int64_t in = 0, out = 0, kernel = 0, stride = 1, padding = 0, size = 0, count = 1;
  bool input_needs_grad = true;  // false for the first convolution, whose input is the images
  std::vector<double> forward_ms, backward_ms;
};

int64_t out_size(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

// ResNet-50's convolutions in forward order (src/nn/resnet50.h has the layout).
std::vector<ConvRow> resnet50_convolutions(int64_t image_size) {
  std::vector<ConvRow> rows;
  int64_t size = image_size;
  rows.push_back({"conv1", 1, 64, 7, 2, 3, size, 1, false, {}, {}});
  size = out_size(out_size(size, 7, 2, 3), 3, 2, 1);  // the stem's stride, then max pooling's
  int64_t in = 64;
  const int64_t widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const std::string layer = "layer" + std::to_string(stage + 1);
    const int64_t planes = widths[stage], stride = stage == 0 ? 1 : 2, wide = 4 * planes;
    const int64_t after = out_size(size, 3, stride, 1);
    // The first block: its 3x3 convolution has the stride, and its shortcut a 1x1 convolution.
    rows.push_back({layer + ".0.conv1", in, planes, 1, 1, 0, size, 1, true, {}, {}});
    rows.push_back({layer + ".0.conv2", planes, planes, 3, stride, 1, size, 1, true, {}, {}});
    rows.push_back({layer + ".0.conv3", planes, wide, 1, 1, 0, after, 1, true, {}, {}});
    rows.push_back({layer + ".0.downsample", in, wide, 1, stride, 0, size, 1, true, {}, {}});
    // The other blocks, alike.
    const int64_t others = blocks[stage] - 1;
    const std::string range = layer + ".1" + (others > 1 ? "-" + std::to_string(others) : "");
    rows.push_back({range + ".conv1", wide, planes, 1, 1, 0, after, others, true, {}, {}});
    rows.push_back({range + ".conv2", planes, planes, 3, 1, 1, after, others, true, {}, {}});
    rows.push_back({range + ".conv3", planes, wide, 1, 1, 0, after, others, true, {}, {}});
    in = wide;
    size = after;
  }
  return rows;
}

// The flops of one forward product: 2 per multiply-add of every tap.
double forward_flops(const ConvRow& r, int64_t batch) {
  const double pixels = static_cast<double>(out_size(r.size, r.kernel, r.stride, r.padding));
  return 2.0 * static_cast<double>(batch * r.out * r.in * r.kernel * r.kernel) * pixels * pixels;
}

// Of a filter's taps, how many a convolution with a 1x1 output multiplies: only those that land
// inside the image (conv2d skips the rest, which would read padding); every tap otherwise.
int64_t taps_multiplied(const ConvRow& r) {
  if (out_size(r.size, r.kernel, r.stride, r.padding) != 1) return r.kernel * r.kernel;
  const int64_t inside = std::min(r.padding + r.size, r.kernel) - std::min(r.padding, r.kernel);
  return inside * inside;
}

double backward_flops(const ConvRow& r, int64_t batch) {
  return forward_flops(r, batch) * (r.input_needs_grad ? 2.0 : 1.0);
}

double milliseconds_of(const std::function<void()>& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// One forward and one backward pass of row `r`, each timed.
void time_row(ConvRow& r, int64_t batch, DType dtype, uint64_t seed) {
  Generator g(seed);
  const Tensor x =
      randn({batch, r.in, r.size, r.size}, TensorOptions(), &g).to(dtype).requires_grad_(r.input_needs_grad);
  const Tensor w =
      (randn({r.out, r.in, r.kernel, r.kernel}, TensorOptions(), &g) * 0.05).to(dtype).detach().requires_grad_(true);
  Tensor y;
  r.forward_ms.push_back(milliseconds_of([&] { y = conv2d(x, w, Tensor(), r.stride, r.padding); }));
  const Tensor probe = ones_like(y);
  r.backward_ms.push_back(milliseconds_of([&] { y.backward(probe); }));
}

// One training step of the whole model (forward, loss, backward, SGD), after one untimed step;
// the forward pass under autocast to `dtype` unless it is f32.
double step_ms(int64_t batch, int64_t image_size, DType dtype, int reps) {
  manual_seed(0);
  const std::shared_ptr<Module> model = make_model("resnet50", 1);
  SGD sgd(model->parameters(), SGDOptions(0.05).momentum(0.9));
  Generator g(7);
  const Tensor images = randn({batch, 1, image_size, image_size}, TensorOptions(), &g);
  // Labels of every class, as a real batch has: with one class only, the model learns to give
  // the others probabilities below f32's normal range within a step, and the step after it runs
  // on denormal numbers, tens of times slower.
  std::vector<int64_t> classes(static_cast<size_t>(batch));
  for (size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<int64_t>(i % 10);
  const Tensor labels = from_vector(classes, {batch});
  std::vector<double> times;
  for (int rep = 0; rep <= reps; ++rep) {
    const double ms = milliseconds_of([&] {
      sgd.zero_grad();
      Tensor loss;
      {
        const AutocastGuard autocast(DeviceType::CPU, DType::bf16, dtype != DType::f32);
        loss = cross_entropy((*model)(images), labels);
      }
      loss.backward();
      sgd.step();
    });
    if (rep > 0) times.push_back(ms);
  }
  return median(times);
}

int run(const Options& o) {
  set_num_threads(o.threads);
  const double peak = cpu::core_peak_flops(o.dtype()) * o.threads / 1e9;  // GFLOP/s
  std::vector<ConvRow> rows = resnet50_convolutions(o.image_size);
  for (int rep = 0; rep < o.reps; ++rep) {
    for (size_t i = 0; i < rows.size(); ++i) time_row(rows[i], o.batch, o.dtype(), 100 + i);
  }
  std::printf("ResNet-50's convolutions, batch %lld of %lldx%lld images, %d thread(s); %s peak %.0f GFLOP/s\n\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.image_size),
              static_cast<long long>(o.image_size), o.threads, dtype_name(o.dtype()).c_str(), peak);
  std::printf("| convolution | count | input | filter | forward ms | GFLOP/s | of peak | backward ms | GFLOP/s | of peak |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  double conv_ms = 0.0, conv_gflop = 0.0;
  for (const ConvRow& r : rows) {
    const double f_ms = median(r.forward_ms), b_ms = median(r.backward_ms);
    const double f_rate = forward_flops(r, o.batch) / f_ms / 1e6, b_rate = backward_flops(r, o.batch) / b_ms / 1e6;
    const bool skips_taps = taps_multiplied(r) < r.kernel * r.kernel;
    std::printf("| %s%s | x%lld | %lldx%lldx%lld | %lldx%lld/%lld, %lld -> %lld | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.0f%% |\n",
                r.name.c_str(), skips_taps ? " (*)" : "", static_cast<long long>(r.count), static_cast<long long>(r.in),
                static_cast<long long>(r.size), static_cast<long long>(r.size), static_cast<long long>(r.kernel),
                static_cast<long long>(r.kernel), static_cast<long long>(r.stride), static_cast<long long>(r.in),
                static_cast<long long>(r.out), f_ms, f_rate, 100.0 * f_rate / peak, b_ms, b_rate, 100.0 * b_rate / peak);
    conv_ms += static_cast<double>(r.count) * (f_ms + b_ms);
    conv_gflop += static_cast<double>(r.count) * (forward_flops(r, o.batch) + backward_flops(r, o.batch)) / 1e9;
  }
  std::printf("\n(*) A 1x1 output: conv2d multiplies only the taps that land inside the image, while the flops, as\n"
              "the model counts them, include every tap; so the rate may pass the peak.\n");
  const double step = step_ms(o.batch, o.image_size, o.dtype(), o.reps);
  std::printf("\nevery convolution of a step, forward and backward: %.0f ms, %.1f GFLOP/s (%.0f%% of peak)\n", conv_ms,
              conv_gflop / conv_ms * 1e3, 100.0 * conv_gflop / conv_ms * 1e3 / peak);
  std::printf("a whole training step (forward, loss, backward, SGD): %.0f ms; the convolutions' share %.0f%%\n", step,
              100.0 * conv_ms / step);
  std::printf(
      "RESULT resnet50_layers threads=%d batch=%lld amp=%s conv_ms=%.1f step_ms=%.1f conv_gflops=%.2f peak_gflops=%.1f\n",
      o.threads, static_cast<long long>(o.batch), o.amp.c_str(), conv_ms, step, conv_gflop / conv_ms * 1e3, peak);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Times each of ResNet-50's convolutions forward and backward against the CPU's peak"};
  app.add_option("--threads", o.threads, "CPU threads (default 1)")->check(number_between(1, kMaxThreads));
  app.add_option("--batch-size", o.batch, "images per step (default 256, the results table's)")
      ->check(positive_number());
  app.add_option("--image-size", o.image_size, "image height and width (default 28, Fashion-MNIST)")
      ->check(number_between(8, 512));
  app.add_option("--reps", o.reps, "timed repetitions; each row's median is reported (default 3)")
      ->check(positive_number());
  app.add_option("--amp", o.amp, "off (f32) or bf16: the convolutions' operands and the step's autocast")
      ->check(CLI::IsMember({"off", "bf16"}));
  return run_program(app, argc, argv, [&] { return run(o); });
}
