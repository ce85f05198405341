// The optimisers' fused CUDA updates against the CPU loops: SGD (plain, momentum, dampening,
// Nesterov, weight decay) and Adam / AdamW (with and without weight decay) over several steps
// with fresh random gradients and a learning-rate change, f32 and f64, on parameters of odd
// sizes (an empty one, a single element, a 2-D one, a large one over thousands of blocks),
// comparing the parameters and every state tensor after each step.
//
// Tolerances: both devices apply the same per-element rule (optim/sgd_rule.h, adam_rule.h),
// but the GPU fuses multiply-adds where the CPU may not; over a few steps the results agree to
// a few roundings: 1e-6 relative and absolute in f32 (the absolute part for momentum buffers
// that cancel towards 0), 1e-12 in f64.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Builds an optimiser over the given parameters.
using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>&)>;

const std::vector<Shape> kParamShapes = {{0}, {1}, {17, 31}, {1000003}};

// Runs `make` on CPU parameters and on copies on the GPU for 4 steps with the same random
// gradients, halving the learning rate after 2, and compares the parameters and the state
// entries `state_names` after every step.
void expect_same_updates(const MakeOptimizer& make, const std::vector<std::string>& state_names, DType dtype,
                         const std::string& what) {
  const double tol = dtype == DType::f64 ? 1e-12 : 1e-6;
  std::vector<Tensor> cpu_params, gpu_params;
  for (size_t k = 0; k < kParamShapes.size(); ++k) {
    const Tensor p = random_cpu(kParamShapes[k], 100 + k, dtype);
    cpu_params.push_back(p.clone().requires_grad_(true));
    gpu_params.push_back(p.to(gpu()).requires_grad_(true));
  }
  const std::unique_ptr<Optimizer> on_cpu = make(cpu_params), on_gpu = make(gpu_params);
  for (uint64_t step = 0; step < 4; ++step) {
    if (step == 2) {
      on_cpu->set_lr(on_cpu->lr() / 2);
      on_gpu->set_lr(on_gpu->lr() / 2);
    }
    for (size_t k = 0; k < kParamShapes.size(); ++k) {
      const Tensor g = random_cpu(kParamShapes[k], 1000 * step + k, dtype);
      cpu_params[k].set_grad(g);
      gpu_params[k].set_grad(g.to(gpu()));
    }
    on_cpu->step();
    on_gpu->step();
    for (size_t k = 0; k < kParamShapes.size(); ++k) {
      const std::string where = what + " " + dtype_name(dtype) + ", step " + std::to_string(step) + ", parameter " +
                                shape_str(kParamShapes[k]);
      ASSERT_TRUE(gpu_params[k].device() == gpu()) << where;
      expect_close(cpu_params[k], gpu_params[k], tol, tol, where);
      for (const std::string& name : state_names) {
        expect_close(on_cpu->state(k, name), on_gpu->state(k, name), tol, tol, where + ", state " + name);
      }
    }
  }
}

template <class Opt, class Options>
MakeOptimizer maker(const Options& options) {
  return [options](const std::vector<Tensor>& params) { return std::make_unique<Opt>(params, options); };
}

}  // namespace

TEST(OptimGpu, SGDMatchesCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    expect_same_updates(maker<SGD>(SGDOptions(0.1)), {}, dtype, "SGD");
    expect_same_updates(maker<SGD>(SGDOptions(0.1).momentum(0.9)), {"momentum_buffer"}, dtype, "SGD momentum");
    expect_same_updates(maker<SGD>(SGDOptions(0.1).momentum(0.9).dampening(0.5)), {"momentum_buffer"}, dtype,
                        "SGD momentum dampening");
    expect_same_updates(maker<SGD>(SGDOptions(0.1).momentum(0.9).nesterov(true)), {"momentum_buffer"}, dtype,
                        "SGD Nesterov");
    expect_same_updates(maker<SGD>(SGDOptions(0.1).weight_decay(0.1)), {}, dtype, "SGD weight decay");
    expect_same_updates(maker<SGD>(SGDOptions(0.1).momentum(0.8).weight_decay(0.05).nesterov(true)),
                        {"momentum_buffer"}, dtype, "SGD Nesterov weight decay");
  }
}

TEST(OptimGpu, AdamAndAdamWMatchCpu) {
  const std::vector<std::string> state = {"exp_avg", "exp_avg_sq"};
  for (DType dtype : {DType::f32, DType::f64}) {
    expect_same_updates(maker<Adam>(AdamOptions(0.1)), state, dtype, "Adam");
    expect_same_updates(maker<Adam>(AdamOptions(0.1).betas(0.8, 0.99).eps(1e-6).weight_decay(0.1)), state, dtype,
                        "Adam weight decay");
    expect_same_updates(maker<AdamW>(AdamOptions(0.1)), state, dtype, "AdamW");
    expect_same_updates(maker<AdamW>(AdamOptions(0.1).betas(0.8, 0.99).eps(1e-6).weight_decay(0.5)), state, dtype,
                        "AdamW weight decay 0.5");
  }
}

TEST(OptimGpu, AdamKeepsItsStepCountOnTheCpu) {
  // The bias corrections need t on the host; keeping it there spares a GPU read per step.
  const Tensor p = random_cpu({8}, 3).to(gpu()).requires_grad_(true);
  Adam adam({p}, AdamOptions(0.1));
  p.set_grad(random_cpu({8}, 4).to(gpu()));
  adam.step();
  adam.step();
  EXPECT_TRUE(adam.state(0, "step").device().is_cpu());
  EXPECT_EQ(adam.state(0, "step").item(), 2.0);
  EXPECT_TRUE(adam.state(0, "exp_avg").device() == gpu());
}
