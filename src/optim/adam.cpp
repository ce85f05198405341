#include "optim/adam.h"

#include <cmath>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/strided_loop.h"

namespace lockstep {

namespace {
// The hyper-parameters of one update of one parameter, bias corrections already folded in.
struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

// Adam's rule for n contiguous elements in a single pass: each element's gradient is read once,
// its two moment estimates and its value are written once.
template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, const AdamStep& s) {
  const T beta1 = static_cast<T>(s.beta1), beta2 = static_cast<T>(s.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - s.beta1), one_minus_beta2 = static_cast<T>(1.0 - s.beta2);
  const T weight_decay = static_cast<T>(s.weight_decay), decay = static_cast<T>(1.0 - s.lr * s.weight_decay);
  const T eps = static_cast<T>(s.eps), step_size = static_cast<T>(s.step_size);
  const T bias_correction2_sqrt = static_cast<T>(s.bias_correction2_sqrt);
  // Local copies of the switches, so the compiler moves the tests out of the loop (see sgd.cpp).
  const bool decoupled = s.decoupled_weight_decay, l2_penalty = !decoupled && s.weight_decay != 0.0;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    if (decoupled) {
      // AdamW: shrink the weight itself, outside the adaptive scaling.
      param[i] *= decay;
    } else if (l2_penalty) {
      // Adam: the L2 penalty's gradient joins the loss's.
      g += weight_decay * param[i];
    }
    // Running averages of the gradient (m) and of its square (v).
    const T m = beta1 * exp_avg[i] + one_minus_beta1 * g;
    const T v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    // Both averages start at 0 and are biased towards it early on; the corrections undo that.
    // (std::sqrt vectorises only when the build passes -fno-math-errno: otherwise each call
    // must be able to set errno, which keeps this loop scalar and about 8x slower.)
    const T denom = std::sqrt(v) / bias_correction2_sqrt + eps;
    param[i] -= step_size * m / denom;
  }
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

void Adam::step() {
  // Like torch.optim's step, which runs under torch.no_grad(): updates are never recorded.
  NoGradGuard no_grad;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor grad = grad_for_step(i);
    if (!grad.defined()) continue;  // no gradient, no update (PyTorch skips .grad None)
    const Tensor& param = params()[i];

    // State starts at zero on the parameter's first update.
    Tensor& step_count = state_entry(i, "step");
    if (!step_count.defined()) {
      step_count = zeros({});  // a 0-d f32 tensor, as PyTorch's torch.tensor(0.)
      state_entry(i, "exp_avg") = zeros_like(param);
      state_entry(i, "exp_avg_sq") = zeros_like(param);
    }
    const double t = ++*step_count.data_ptr<float>();

    AdamStep s{lr(), beta1_, beta2_, eps_, weight_decay_, decoupled_weight_decay_, 0.0, 0.0};
    s.step_size = s.lr / (1.0 - std::pow(beta1_, t));
    s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2_, t));
    const Tensor& exp_avg = state_entry(i, "exp_avg");
    const Tensor& exp_avg_sq = state_entry(i, "exp_avg_sq");
    dispatch_floating(param.dtype(), name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      adam_update<T>(param.numel(), param.data_ptr<T>(), grad.data_ptr<T>(), exp_avg.data_ptr<T>(),
                     exp_avg_sq.data_ptr<T>(), s);
    });
  }
}

}  // namespace lockstep
