/// \file
/// Where one training step of chapter 2's CNN spends its time, against the machine's limits:
/// every layer's forward pass and every piece of its backward pass, timed on its own, with its
/// flops, the bytes it must move at least, and the fraction of the CPU's peak it reaches.
///
///     build/tests/cnn_roofline [--threads 1] [--batch-size 64] [--reps 11] [--csv FILE]
///                              [--peak GFLOPS] [--bandwidth GBS] [--l3-bandwidth GBS]
///
/// The model is make_model("cnn") (nn/models.cpp) in f32. Each row runs what the op, or the
/// backward function autograd records for it, runs: the CPU kernel itself (conv2d, max pooling,
/// the ReLU and its gradient, cross entropy; tensor/ops/cpu/) or the public op (linear, the
/// matmuls of its backward pass, the bias gradients' sums), output allocated as the op does.
/// The convolutions' backward kernel computes the input gradient and the weight gradient
/// separately when asked for one only, so each is a row; the first convolution's input is the
/// images, which need no gradient. Each row's inputs are the outputs of the rows before it, so
/// the values are a real step's (the gradient of the loss starts the backward rows).
///
/// Counting, per row: flops are 2 M N K for each product (conv: per image; linear: the
/// batch's), plus 1 per element for adds, comparisons (ReLU, max pooling's 3 per 2x2 window) and
/// the bias; cross entropy counts 4 per logit forward (max, subtract, exp, sum) and 3 backward.
/// Bytes are the least traffic: every input, output and weight tensor read or written once,
/// 4 bytes per f32 value, 8 per pooling index or label. Intensity is flops per byte.
///
/// Timing: each row is a loop of calls lasting about 30 ms, repeated --reps times, the rows
/// taking turns so that other work on the machine slows all of them alike; each row reports
/// the median. "step" times forward, loss and backward through autograd (as bench_cnn_step
/// does, with zero_grad first as a training loop does) the same way, to set beside the rows'
/// sum. At start the program measures, on the same number of threads, the f32 peak (peak.h:
/// FMAs in registers, best of three) and STREAM's bandwidth from memory and from the L3, unless
/// --peak, --bandwidth and --l3-bandwidth give them; a row's "roof" is the most its intensity
/// allows, min(peak, L3 bandwidth x intensity). It ends with a RESULT line, and --csv writes the
/// rows for tools/figures/roofline.py.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/program.h"
#include "lockstep.h"
#include "peak.h"
#include "tensor/ops/dispatch/conv_kernels.h"
#include "tensor/ops/dispatch/loss_kernels.h"
#include "tensor/ops/dispatch/pool_kernels.h"
#include "tensor/ops/dispatch/relu_kernels.h"

namespace {

using namespace lockstep;

using Clock = std::chrono::steady_clock;

constexpr double kRepSeconds = 0.03;  // one repetition's loop of calls
constexpr double kPeakSeconds = 0.1;  // one run of the peak's FMA loop (peak_flops: 0.3)

struct Options {
  int threads = 1;
  int64_t batch = 64;
  int reps = 11;
  double peak = 0.0;          // GFLOP/s; 0: measure
  double bandwidth = 0.0;     // GB/s from memory; 0: measure
  double l3_bandwidth = 0.0;  // GB/s from the L3 cache; 0: measure
  std::string csv;
};

// One timed piece of the step.
struct Row {
  std::string layer, pass, shape;
  double flops = 0.0, bytes = 0.0;
  std::function<void()> run;
  int64_t calls = 1;       // per repetition
  std::vector<double> ms;  // per call, one value per repetition
  double median_ms() const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// How many calls of `run` last about kRepSeconds, after two calls that warm it up (fresh
// buffers' first touch, the allocator's cache, the code).
int64_t calibrate(const std::function<void()>& run) {
  run();
  const auto start = Clock::now();
  run();
  const double once = seconds_since(start);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(kRepSeconds / std::max(once, 1e-9))));
}

// Milliseconds per call over one repetition of `row`.
void time_once(Row& row) {
  const auto start = Clock::now();
  for (int64_t i = 0; i < row.calls; ++i) row.run();
  row.ms.push_back(seconds_since(start) * 1e3 / static_cast<double>(row.calls));
}

// The convolution's sizes for `channels` x `size` x `size` images and a k x k filter, stride 1,
// no padding (chapter 2's CNN).
Conv2dGeometry conv_geometry(int64_t channels, int64_t size, int64_t k) {
  Conv2dGeometry g;
  g.channels = channels;
  g.height = g.width = size;
  g.kernel_h = g.kernel_w = k;
  g.out_h = g.out_w = size - k + 1;
  return g;
}

// A parameter of the model by its name ("0.weight": the first module's weight), detached: the
// rows call kernels and ops directly and must not record a graph.
Tensor parameter(const Module& model, const std::string& name) {
  for (const auto& [key, value] : model.named_parameters()) {
    if (key == name) return value.detach();
  }
  throw Error("cnn_roofline: make_model(\"cnn\") has no parameter '" + name +
              "': the model changed, so this program's list of layers must change with it");
}

// A tensor's shape as the table shows it: "64x32x26x26".
std::string dims(const Shape& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

// A product's sizes M x N x K, after the number of such products when there are several (one
// per image): "64 x 32x676x9".
std::string product(int64_t batch, int64_t M, int64_t N, int64_t K) {
  const std::string mnk = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  return batch > 1 ? std::to_string(batch) + " x " + mnk : mnk;
}

// The tensors of one step, each written by the row that computes it and read by later rows.
struct Step {
  // Forward. x: (N, 1, 28, 28) images; y1, a1: (N, 32, 26, 26); p1, i1: (N, 32, 13, 13);
  // y2, a2: (N, 64, 11, 11); p2, i2: (N, 64, 5, 5); f: (N, 1600); h, a3: (N, 128);
  // logits, log_probs: (N, 10); loss: 0-d. m1, m2, m3: the ReLUs' masks, a bit per value.
  Tensor x, labels, y1, a1, m1, p1, i1, y2, a2, m2, p2, i2, f, h, a3, m3, logits, log_probs, loss;
  // Backward: d<name> is the loss's gradient with respect to <name>; dw*, db* the parameters'.
  Tensor dlogits, da3, dh, df, dp2, da2, dy2, dp1, da1, dy1;
  Tensor dw4, db4, dw3, db3, dw2, db2, dw1, db1;
};

// The CPU's name as /proc/cpuinfo gives it ("AMD EPYC").
std::string cpu_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      const size_t start = line.find_first_not_of(' ', colon + 1);
      std::string name = start == std::string::npos ? "" : line.substr(start);
      while (!name.empty() && name.back() == ' ') name.pop_back();
      return name;
    }
  }
  return "unknown CPU";
}

int run(const Options& o) {
  check_output_file("--csv", o.csv);
  set_num_threads(o.threads);
  const int64_t N = o.batch;

  // The machine's limits, on the threads the rows use.
  double peak_gflops = o.peak;
  if (peak_gflops == 0.0) {
    peak_gflops = peak::best_rate(peak::PeakKernel::f32_fma, kPeakSeconds, o.threads > 1) / 1e9;
  }
  // A roof is a limit: the faster of STREAM's two kernels.
  const auto measure = [&o](const char* what, double given, peak::Bandwidth (*stream)(int)) {
    if (given > 0.0) return given;
    const peak::Bandwidth measured = stream(o.threads);
    std::printf("%s bandwidth (STREAM): copy %.1f GB/s, triad %.1f GB/s\n", what, measured.copy, measured.triad);
    return std::max(measured.copy, measured.triad);
  };
  const double bandwidth = measure("memory", o.bandwidth, peak::memory_bandwidth);
  const double l3_bandwidth = measure("L3", o.l3_bandwidth, peak::l3_bandwidth);
  const std::string machine = cpu_name();
  std::printf("machine: %s, %s; %d thread%s; f32 peak %.1f GFLOP/s%s; bandwidth %.1f GB/s from memory%s, %.1f from "
              "the L3%s\n",
              machine.c_str(), peak::kIsa, o.threads, o.threads > 1 ? "s" : "", peak_gflops,
              o.peak > 0 ? " (given)" : "", bandwidth, o.bandwidth > 0 ? " (given)" : "", l3_bandwidth,
              o.l3_bandwidth > 0 ? " (given)" : "");

  // The model's parameters. conv1: w1 (32, 1, 3, 3), b1 (32); conv2: w2 (64, 32, 3, 3), b2 (64);
  // fc1: w3 (128, 1600), b3 (128); fc2: w4 (10, 128), b4 (10).
  const std::shared_ptr<Module> model = make_model("cnn");
  const Tensor w1 = parameter(*model, "0.weight"), b1 = parameter(*model, "0.bias");
  const Tensor w2 = parameter(*model, "3.weight"), b2 = parameter(*model, "3.bias");
  const Tensor w3 = parameter(*model, "7.weight"), b3 = parameter(*model, "7.bias");
  const Tensor w4 = parameter(*model, "9.weight"), b4 = parameter(*model, "9.bias");
  const Conv2dGeometry g1 = conv_geometry(1, 28, 3), g2 = conv_geometry(32, 13, 3);

  Step s;
  s.x = randn({N, 1, 28, 28});
  std::vector<int64_t> classes(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) classes[static_cast<size_t>(i)] = i % 10;
  s.labels = from_vector(classes, {N});  // (N)
  const Tensor one = ones({});           // d loss / d loss, where backward starts
  const TensorOptions index_options = TensorOptions().dtype(DType::i64);

  std::vector<Row> rows;
  const auto add = [&](std::string layer, std::string pass, std::string shape, double flops, double bytes,
                       std::function<void()> run) {
    Row row;
    row.layer = std::move(layer);
    row.pass = std::move(pass);
    row.shape = std::move(shape);
    row.flops = flops;
    row.bytes = bytes;
    row.run = std::move(run);
    rows.push_back(std::move(row));
  };
  const double F = 4.0;      // bytes per f32 value
  const double INDEX = 8.0;  // bytes per i64 pooling index or label

  // A convolution's forward, input-gradient and weight-gradient rows, and its bias gradient.
  // Per image the products are (C_out x P x K), (K x P x C_out) and (C_out x K x P), with P
  // output pixels and K values per patch.
  const auto conv_rows = [&](const std::string& layer, const Conv2dGeometry& g, const Tensor& w, const Tensor& b,
                             Tensor Step::*in, Tensor Step::*out, Tensor Step::*d_out, Tensor Step::*d_in,
                             Tensor Step::*dw, Tensor Step::*db, bool forward) {
    const double C_out = static_cast<double>(w.size(0)), K = static_cast<double>(g.patch_size());
    const double P = static_cast<double>(g.out_pixels()), n = static_cast<double>(N);
    const double in_values = n * static_cast<double>(g.channels * g.height * g.width), out_values = n * C_out * P;
    if (forward) {
      add(layer, "forward", product(N, w.size(0), g.out_pixels(), g.patch_size()), 2 * n * C_out * P * K + out_values,
          F * (in_values + C_out * K + C_out + out_values), [&s, &g, w, b, in, out, N] {
            s.*out = empty({N, w.size(0), g.out_h, g.out_w});
            cpu::conv2d_forward_kernel(s.*in, w, b, s.*out, g);
          });
      return;
    }
    if (d_in) {
      // The product W^T dy, then col2im's adds (one per entry of the product's result).
      add(layer, "backward input", product(N, g.patch_size(), g.out_pixels(), w.size(0)),
          2 * n * K * P * C_out + n * K * P, F * (out_values + C_out * K + in_values), [&s, &g, w, in, d_out, d_in] {
            s.*d_in = empty_like(s.*in);
            cpu::conv2d_backward_kernel(s.*d_out, s.*in, w, s.*d_in, Tensor(), g);
          });
    }
    add(layer, "backward weight", product(N, w.size(0), g.patch_size(), g.out_pixels()), 2 * n * C_out * K * P,
        F * (out_values + in_values + C_out * K), [&s, &g, w, in, d_out, dw] {
          s.*dw = empty_like(w);
          cpu::conv2d_backward_kernel(s.*d_out, s.*in, w, Tensor(), s.*dw, g);
        });
    add(layer, "backward bias", dims({N, w.size(0), g.out_h, g.out_w}), out_values, F * (out_values + C_out),
        [&s, d_out, db] { s.*db = sum(s.*d_out, {0, 2, 3}); });
  };
  // ReLU forward (max(x, 0) and the mask of where it passes) or backward (dy where the mask's
  // bit is set), one flop per value; the mask moves one bit per value.
  const auto relu_rows = [&](const std::string& layer, const Shape& shape, Tensor Step::*in, Tensor Step::*out,
                             Tensor Step::*mask, Tensor Step::*d_out, Tensor Step::*d_in, bool forward) {
    const double values = static_cast<double>(shape_numel(shape));
    if (forward) {
      add(layer, "forward", dims(shape), values, F * 2 * values + values / 8, [&s, in, out, mask] {
        s.*out = empty_like(s.*in);
        s.*mask = empty({relu_mask_bytes((s.*in).numel())}, TensorOptions().dtype(DType::u8));
        cpu::relu_kernel(s.*in, s.*out, s.*mask);
      });
    } else {
      add(layer, "backward", dims(shape), values, F * 2 * values + values / 8, [&s, mask, d_out, d_in] {
        s.*d_in = empty_like(s.*d_out);
        cpu::relu_backward_kernel(s.*d_out, s.*mask, s.*d_in);
      });
    }
  };
  // 2x2 max pooling, stride 2: 3 comparisons per window forward; backward, one add per window
  // into a gradient that is zero elsewhere.
  const auto pool_rows = [&](const std::string& layer, const Shape& in_shape, Tensor Step::*in, Tensor Step::*out,
                             Tensor Step::*indices, Tensor Step::*d_out, Tensor Step::*d_in, bool forward) {
    const Shape out_shape = {in_shape[0], in_shape[1], in_shape[2] / 2, in_shape[3] / 2};
    const double in_values = static_cast<double>(shape_numel(in_shape));
    const double windows = static_cast<double>(shape_numel(out_shape));
    const std::string shape = dims(in_shape) + " -> " + dims(out_shape);
    if (forward) {
      add(layer, "forward", shape, 3 * windows, F * (in_values + windows) + INDEX * windows,
          [&s, &index_options, out_shape, in, out, indices] {
            s.*out = empty(out_shape);
            s.*indices = empty(out_shape, index_options);
            cpu::max_pool2d_kernel(s.*in, 2, 2, 0, s.*out, s.*indices);
          });
    } else {
      add(layer, "backward", shape, windows, F * (windows + in_values) + INDEX * windows, [&s, in, indices, d_out, d_in] {
        s.*d_in = empty_like(s.*in);
        cpu::max_pool2d_backward_kernel(s.*d_out, s.*indices, 2, 2, 0, s.*d_in);
      });
    }
  };
  // A linear layer on (N, in) -> (N, out): y = x W^T + b, dx = dy W, dW = dy^T x, db = dy
  // summed over the rows, through the public ops its forward and backward functions call.
  const auto linear_rows = [&](const std::string& layer, const Tensor& w, const Tensor& b, Tensor Step::*in,
                               Tensor Step::*out, Tensor Step::*d_out, Tensor Step::*d_in, Tensor Step::*dw,
                               Tensor Step::*db, bool forward) {
    const double n = static_cast<double>(N);
    const double out_f = static_cast<double>(w.size(0)), in_f = static_cast<double>(w.size(1));
    if (forward) {
      add(layer, "forward", product(1, N, w.size(0), w.size(1)), 2 * n * out_f * in_f + n * out_f,
          F * (n * in_f + out_f * in_f + out_f + n * out_f), [&s, w, b, in, out] { s.*out = linear(s.*in, w, b); });
      return;
    }
    add(layer, "backward input", product(1, N, w.size(1), w.size(0)), 2 * n * in_f * out_f,
        F * (n * out_f + out_f * in_f + n * in_f), [&s, w, d_out, d_in] { s.*d_in = matmul(s.*d_out, w); });
    add(layer, "backward weight", product(1, w.size(0), w.size(1), N), 2 * out_f * in_f * n,
        F * (n * out_f + n * in_f + out_f * in_f), [&s, in, d_out, dw] { s.*dw = matmul((s.*d_out).t(), s.*in); });
    add(layer, "backward bias", dims({N, w.size(0)}), n * out_f, F * (n * out_f + out_f),
        [&s, d_out, db] { s.*db = sum(s.*d_out, {0}); });
  };

  const Shape conv1_out = {N, 32, 26, 26}, conv2_out = {N, 64, 11, 11};
  // Forward, in the model's order; flatten is a view, costs nothing and is no row.
  conv_rows("conv1", g1, w1, b1, &Step::x, &Step::y1, nullptr, nullptr, nullptr, nullptr, true);
  relu_rows("relu1", conv1_out, &Step::y1, &Step::a1, &Step::m1, nullptr, nullptr, true);
  pool_rows("pool1", conv1_out, &Step::a1, &Step::p1, &Step::i1, nullptr, nullptr, true);
  conv_rows("conv2", g2, w2, b2, &Step::p1, &Step::y2, nullptr, nullptr, nullptr, nullptr, true);
  relu_rows("relu2", conv2_out, &Step::y2, &Step::a2, &Step::m2, nullptr, nullptr, true);
  pool_rows("pool2", conv2_out, &Step::a2, &Step::p2, &Step::i2, nullptr, nullptr, true);
  linear_rows("fc1", w3, b3, &Step::f, &Step::h, nullptr, nullptr, nullptr, nullptr, true);
  relu_rows("relu3", {N, 128}, &Step::h, &Step::a3, &Step::m3, nullptr, nullptr, true);
  linear_rows("fc2", w4, b4, &Step::a3, &Step::logits, nullptr, nullptr, nullptr, nullptr, true);
  add("loss", "forward", dims({N, 10}), 4.0 * N * 10, F * (2 * N * 10 + 1) + INDEX * N, [&s] {
    s.log_probs = empty({s.logits.size(0), s.logits.size(1)});
    s.loss = empty({});
    cpu::cross_entropy_kernel(s.logits, s.labels, s.log_probs, s.loss);
  });
  // Backward, in the order autograd runs it.
  add("loss", "backward", dims({N, 10}), 3.0 * N * 10, F * (2 * N * 10 + 1) + INDEX * N, [&s, &one] {
    s.dlogits = empty_like(s.log_probs);
    cpu::cross_entropy_backward_kernel(one, s.log_probs, s.labels, s.dlogits);
  });
  linear_rows("fc2", w4, b4, &Step::a3, nullptr, &Step::dlogits, &Step::da3, &Step::dw4, &Step::db4, false);
  relu_rows("relu3", {N, 128}, nullptr, nullptr, &Step::m3, &Step::da3, &Step::dh, false);
  linear_rows("fc1", w3, b3, &Step::f, nullptr, &Step::dh, &Step::df, &Step::dw3, &Step::db3, false);
  pool_rows("pool2", conv2_out, &Step::a2, nullptr, &Step::i2, &Step::dp2, &Step::da2, false);
  relu_rows("relu2", conv2_out, nullptr, nullptr, &Step::m2, &Step::da2, &Step::dy2, false);
  conv_rows("conv2", g2, w2, b2, &Step::p1, nullptr, &Step::dy2, &Step::dp1, &Step::dw2, &Step::db2, false);
  pool_rows("pool1", conv1_out, &Step::a1, nullptr, &Step::i1, &Step::dp1, &Step::da1, false);
  relu_rows("relu1", conv1_out, nullptr, nullptr, &Step::m1, &Step::da1, &Step::dy1, false);
  // The images need no gradient, so conv1 has no input-gradient row (autograd skips it too).
  conv_rows("conv1", g1, w1, b1, &Step::x, nullptr, &Step::dy1, nullptr, &Step::dw1, &Step::db1, false);

  // One pass in order fills every tensor a later row reads; fc1's input is p2 seen as (N, 1600),
  // and pool2's backward reads fc1's input gradient seen as (N, 64, 5, 5).
  for (Row& row : rows) {
    if (row.layer == "fc1" && row.pass == "forward") s.f = s.p2.reshape({N, 1600});
    if (row.layer == "pool2" && row.pass == "backward") s.dp2 = s.df.reshape({N, 64, 5, 5});
    row.run();
  }

  // The whole step through autograd, as a training loop runs it.
  Row step;
  step.layer = "step";
  step.pass = "autograd";
  step.run = [&model, &s] {
    model->zero_grad();
    Tensor loss = cross_entropy((*model)(s.x), s.labels);
    loss.backward();
  };

  for (Row& row : rows) row.calls = calibrate(row.run);
  step.calls = calibrate(step.run);
  for (int rep = 0; rep < o.reps; ++rep) {
    for (Row& row : rows) time_once(row);
    time_once(step);
  }

  double total_ms = 0.0, total_flops = 0.0, total_bytes = 0.0, below_half_ms = 0.0;
  for (const Row& row : rows) {
    total_ms += row.median_ms();
    total_flops += row.flops;
    total_bytes += row.bytes;
  }
  const auto gflops = [](double flops, double ms) { return flops / (ms * 1e-3) / 1e9; };
  // The most a row of this intensity can reach: the L3's slope or the peak's flat roof. Every
  // row's tensors (17 MB at most at batch 64) fit in the L3, and a row's loop of calls finds
  // them there, as the step finds most of what the layer before it wrote.
  const auto roof = [&](double intensity) { return std::min(peak_gflops, l3_bandwidth * intensity); };

  std::printf("\nchapter 2's CNN, batch %lld, f32, %d thread%s: median of %d repetitions per row\n",
              static_cast<long long>(N), o.threads, o.threads > 1 ? "s" : "", o.reps);
  std::printf("%-6s %-16s %-26s %9s %8s %7s %8s %8s %6s %6s %6s\n", "layer", "pass", "shape", "MFLOP", "MB",
              "flop/B", "ms", "GFLOP/s", "peak", "roof", "share");
  std::FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (!o.csv.empty() && !csv) throw Error("--csv: cannot write '" + o.csv + "'");
  if (csv) {
    std::fprintf(csv, "# machine=%s\n# isa=%s\n# threads=%d\n# batch=%lld\n# peak_gflops=%.2f\n", machine.c_str(),
                 peak::kIsa, o.threads, static_cast<long long>(N), peak_gflops);
    std::fprintf(csv, "# bandwidth_gbs=%.2f\n# l3_bandwidth_gbs=%.2f\n", bandwidth, l3_bandwidth);
    std::fprintf(csv, "layer,pass,shape,flops,bytes,intensity,ms,gflops,fraction_of_peak,fraction_of_roof,share\n");
  }
  for (const Row& row : rows) {
    const double ms = row.median_ms(), rate = gflops(row.flops, ms), intensity = row.flops / row.bytes;
    if (rate < 0.5 * peak_gflops) below_half_ms += ms;
    std::printf("%-6s %-16s %-26s %9.2f %8.3f %7.2f %8.4f %8.1f %5.1f%% %5.1f%% %5.1f%%\n", row.layer.c_str(),
                row.pass.c_str(), row.shape.c_str(), row.flops / 1e6, row.bytes / 1e6, intensity, ms, rate,
                100 * rate / peak_gflops, 100 * rate / roof(intensity), 100 * ms / total_ms);
    if (csv) {
      std::fprintf(csv, "%s,%s,%s,%.0f,%.0f,%.4f,%.5f,%.3f,%.5f,%.5f,%.5f\n", row.layer.c_str(), row.pass.c_str(),
                   row.shape.c_str(), row.flops, row.bytes, intensity, ms, rate, rate / peak_gflops,
                   rate / roof(intensity), ms / total_ms);
    }
  }
  const double step_ms = step.median_ms();
  const double total_rate = gflops(total_flops, total_ms), step_rate = gflops(total_flops, step_ms);
  std::printf("%-6s %-16s %-26s %9.2f %8.3f %7.2f %8.4f %8.1f %5.1f%% %6s %5.1f%%\n", "total", "sum of rows", "",
              total_flops / 1e6, total_bytes / 1e6, total_flops / total_bytes, total_ms, total_rate,
              100 * total_rate / peak_gflops, "", 100.0);
  std::printf("%-6s %-16s %-26s %9.2f %8s %7s %8.4f %8.1f %5.1f%%\n", "step", "autograd", "forward+loss+backward",
              total_flops / 1e6, "", "", step_ms, step_rate, 100 * step_rate / peak_gflops);
  std::printf("\nThe rows add up to %.1f%% of the step through autograd; %.1f%% of the rows' time runs below half "
              "the peak.\n",
              100 * total_ms / step_ms, 100 * below_half_ms / total_ms);
  if (csv) {
    std::fprintf(csv, "total,sum of rows,,%.0f,%.0f,%.4f,%.5f,%.3f,%.5f,,1\n", total_flops, total_bytes,
                 total_flops / total_bytes, total_ms, total_rate, total_rate / peak_gflops);
    std::fprintf(csv, "step,autograd,,%.0f,,,%.5f,%.3f,%.5f,,\n", total_flops, step_ms, step_rate,
                 step_rate / peak_gflops);
    if (std::fclose(csv) != 0) throw Error("--csv: writing '" + o.csv + "' failed (is the disk full?)");
  }
  std::printf("RESULT cnn_roofline threads=%d batch=%lld rows_ms=%.3f step_ms=%.3f total_gflops=%.2f "
              "step_gflops=%.2f peak_gflops=%.1f bandwidth_gbs=%.1f l3_bandwidth_gbs=%.1f below_half_peak=%.3f\n",
              o.threads, static_cast<long long>(N), total_ms, step_ms, total_rate, step_rate, peak_gflops, bandwidth,
              l3_bandwidth, below_half_ms / total_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Times every layer's forward and backward pass of chapter 2's CNN against the CPU's peak"};
  app.add_option("--threads", o.threads, "CPU threads for the kernels and the peak (default 1)")
      ->check(number_between(1, kMaxThreads));
  app.add_option("--batch-size", o.batch, "images per step (default 64)")->check(positive_number());
  app.add_option("--reps", o.reps, "timed repetitions per row, about 30 ms each; each row's median is reported "
                                   "(default 11)")
      ->check(positive_number());
  app.add_option("--peak", o.peak, "f32 peak in GFLOP/s (e.g. peak_flops's f32_1) instead of measuring it")
      ->check(positive_number());
  app.add_option("--bandwidth", o.bandwidth, "memory bandwidth in GB/s instead of measuring it")
      ->check(positive_number());
  app.add_option("--l3-bandwidth", o.l3_bandwidth, "the L3 cache's bandwidth in GB/s instead of measuring it")
      ->check(positive_number());
  app.add_option("--csv", o.csv, "write the rows as CSV to this file (for tools/figures/roofline.py)");
  return run_program(app, argc, argv, [&] { return run(o); });
}
