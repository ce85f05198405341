#include "optim/adam.h"

#include <cmath>
#include <utility>

#include "core/dispatch.h"
#include "core/error.h"
#include "tensor/strided_loop.h"
#include "optim/adam_rule.h"
#include "optim/cuda/fused_updates.h"
#include "tensor/ops/kernels/dispatch.h"

namespace lockstep {

namespace {
// Adam on the CPU: adam_rule (optim/adam_rule.h, shared with the CUDA kernel) for each of n
// contiguous elements, on several threads for large parameters (see sgd.cpp for `c`).
template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, const AdamConstants<T>& constants) {
  const AdamConstants<T> c = constants;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain) firstprivate(c)
  for (int64_t i = 0; i < n; ++i) adam_rule(i, param, grad, exp_avg, exp_avg_sq, c);
}

// PyTorch's defaults differ only in the weight decay.
double default_weight_decay(bool decoupled) { return decoupled ? 1e-2 : 0.0; }
}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", std::move(params), options, /*decoupled_weight_decay=*/false) {}

Adam::Adam(std::string name, std::vector<Tensor> params, const AdamOptions& options, bool decoupled_weight_decay)
    : Optimizer(std::move(name), std::move(params), options.lr()),
      beta1_(options.betas().first),
      beta2_(options.betas().second),
      eps_(options.eps()),
      weight_decay_(options.weight_decay().value_or(default_weight_decay(decoupled_weight_decay))),
      decoupled_weight_decay_(decoupled_weight_decay) {
  LOCKSTEP_CHECK(eps_ >= 0.0, this->name(), ": expected an eps >= 0, got ", eps_);
  LOCKSTEP_CHECK(beta1_ >= 0.0 && beta1_ < 1.0, this->name(), ": expected betas in [0, 1), got beta1 = ", beta1_);
  LOCKSTEP_CHECK(beta2_ >= 0.0 && beta2_ < 1.0, this->name(), ": expected betas in [0, 1), got beta2 = ", beta2_);
  LOCKSTEP_CHECK(weight_decay_ >= 0.0, this->name(), ": expected a weight_decay >= 0, got ", weight_decay_);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("AdamW", std::move(params), options, /*decoupled_weight_decay=*/true) {}

void Adam::update(size_t param_index, const Tensor& param, const Tensor& grad) {
  // State starts at zero on the parameter's first update.
  Tensor& step_count = state_entry(param_index, "step");
  if (!step_count.defined()) {
    // A 0-d f32 tensor, as PyTorch's torch.tensor(0.), kept on the CPU even for a GPU
    // parameter (as PyTorch does): the bias corrections below need t on the host.
    step_count = zeros({});
    state_entry(param_index, "exp_avg") = zeros_like(param);
    state_entry(param_index, "exp_avg_sq") = zeros_like(param);
  }
  const double t = ++*step_count.data_ptr<float>();

  AdamStep s{lr(), beta1_, beta2_, eps_, weight_decay_, decoupled_weight_decay_, 0.0, 0.0};
  s.step_size = s.lr / (1.0 - std::pow(beta1_, t));
  s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2_, t));
  const Tensor& exp_avg = state_entry(param_index, "exp_avg");
  const Tensor& exp_avg_sq = state_entry(param_index, "exp_avg_sq");
  dispatch_floating(param.dtype(), name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamConstants<T> c = adam_constants<T>(s);
    // The same rule on either device: a loop here, one fused kernel on a GPU.
    using Update = void(int64_t, T*, const T*, T*, T*, const AdamConstants<T>&);
    constexpr DeviceKernels<Update> adam_kernels{adam_update<T>, cuda::adam_update};
    adam_kernels.call(param.device(), param.numel(), param.data_ptr<T>(), grad.data_ptr<T>(), exp_avg.data_ptr<T>(),
                      exp_avg_sq.data_ptr<T>(), c);
  });
  // Written through their pointers, so counted here (step() counts the parameter's write).
  for (const Tensor& written : {step_count, exp_avg, exp_avg_sq}) increment_version(written);
}

}  // namespace lockstep
