#include "optim/sgd.h"

#include <utility>

#include "autograd/grad_mode.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/strided_loop.h"

namespace lockstep {

namespace {
// The hyper-parameters of one update of one parameter.
struct SGDStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer does not exist yet: it starts as d
};

//! [sgd rule]
// SGD's rule for n contiguous elements in a single pass: each element's gradient is read once,
// and its momentum buffer and value are written once. `buf` is unused without momentum.
template <class T>
void sgd_update(int64_t n, T* param, const T* grad, T* buf, const SGDStep& s) {
  const T lr = static_cast<T>(s.lr), momentum = static_cast<T>(s.momentum);
  const T weight_decay = static_cast<T>(s.weight_decay), keep = static_cast<T>(1.0 - s.dampening);
  // Local copies of the switches: the compiler can see they never change inside the loop, and
  // compiles one vectorised loop per combination instead of testing them per element.
  const bool use_weight_decay = s.weight_decay != 0.0, use_momentum = s.momentum != 0.0;
  const bool nesterov = s.nesterov, first_step = s.first_step;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    // d = g + weight_decay * p: the L2 penalty's gradient joins the loss's.
    T d = grad[i];
    if (use_weight_decay) d += weight_decay * param[i];
    if (use_momentum) {
      // buf = momentum * buf + (1 - dampening) * d, or d itself on the first step.
      const T b = first_step ? d : momentum * buf[i] + keep * d;
      buf[i] = b;
      // Nesterov looks ahead along the buffer; classical momentum steps along it.
      d = nesterov ? d + momentum * b : b;
    }
    param[i] -= lr * d;
  }
}
//! [sgd rule]
}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer("SGD", std::move(params), options.lr()),
      momentum_(options.momentum()),
      dampening_(options.dampening()),
      weight_decay_(options.weight_decay()),
      nesterov_(options.nesterov()) {
  LOCKSTEP_CHECK(momentum_ >= 0.0, "SGD: expected a momentum >= 0, got ", momentum_);
  LOCKSTEP_CHECK(weight_decay_ >= 0.0, "SGD: expected a weight_decay >= 0, got ", weight_decay_);
  LOCKSTEP_CHECK(!nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0),
                 "SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got momentum ", momentum_,
                 " and dampening ", dampening_);
}

void SGD::step() {
  // Like torch.optim's step, which runs under torch.no_grad(): updates are never recorded.
  NoGradGuard no_grad;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor grad = grad_for_step(i);
    if (!grad.defined()) continue;  // no gradient, no update (PyTorch skips .grad None)
    const Tensor& param = params()[i];

    SGDStep s{lr(), momentum_, dampening_, weight_decay_, nesterov_, false};
    Tensor buf;
    if (momentum_ != 0.0) {
      Tensor& entry = state_entry(i, "momentum_buffer");
      s.first_step = !entry.defined();
      if (s.first_step) entry = empty_like(param);
      buf = entry;
    }
    dispatch_floating(param.dtype(), "SGD", [&](auto tag) {
      using T = typename decltype(tag)::type;
      sgd_update<T>(param.numel(), param.data_ptr<T>(), grad.data_ptr<T>(),
                    buf.defined() ? buf.data_ptr<T>() : nullptr, s);
    });
  }
}

}  // namespace lockstep
