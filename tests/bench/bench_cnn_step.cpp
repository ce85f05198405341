/// \file
/// Benchmark of one training step of chapter 2's CNN (nn/models.cpp, make_model("cnn")) on the
/// CPU, in f32 and under bf16 autocast, on the same model, batch and inputs: what chapter 5's
/// "is mixed precision faster here?" compares.
///
/// How to read it: `BM_CnnStep/amp:A/threads:T` times forward, cross_entropy and backward of a
/// batch of 64 (A = 0: plain f32; A = 1: the forward pass and the loss inside
/// `AutocastGuard(DeviceType::CPU, DType::bf16)`, backward after it, as a training loop runs
/// them); `BM_CnnForward` the forward pass alone under NoGradGuard. Times are wall-clock per
/// step. The gradients are left to accumulate from step to step, which costs the same in both
/// dtypes (they are f32 parameters either way).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "lockstep.h"

namespace {

using namespace lockstep;

// The model, a batch of random images and its labels, made once per benchmark.
struct CnnBatch {
  std::shared_ptr<Module> model = make_model("cnn");
  Tensor images = randn({64, 1, 28, 28});                                 // (N, C, H, W)
  Tensor labels = from_vector(std::vector<int64_t>(64, 3), {64});       // (N)
};

// Arguments: {amp, threads}.
void BM_CnnStep(benchmark::State& state) {
  const bool amp = state.range(0) != 0;
  set_num_threads(static_cast<int>(state.range(1)));
  CnnBatch batch;
  for (auto _ : state) {
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, DType::bf16, amp);
      loss = cross_entropy((*batch.model)(batch.images), batch.labels);
    }
    loss.backward();
  }
}

// Arguments: {amp, threads}.
void BM_CnnForward(benchmark::State& state) {
  const bool amp = state.range(0) != 0;
  set_num_threads(static_cast<int>(state.range(1)));
  CnnBatch batch;
  for (auto _ : state) {
    AutocastGuard autocast(DeviceType::CPU, DType::bf16, amp);
    NoGradGuard no_grad;
    benchmark::DoNotOptimize((*batch.model)(batch.images));
  }
}

}  // namespace

BENCHMARK(BM_CnnStep)
    ->ArgNames({"amp", "threads"})
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CnnForward)
    ->ArgNames({"amp", "threads"})
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
