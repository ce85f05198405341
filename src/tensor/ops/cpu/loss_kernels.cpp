// CPU cross-entropy and nll losses and their backward passes (declared in loss_kernels.h).
// Cross entropy runs log_softmax_line on each row and picks the target's entry while the row is
// still in cache; every sum is accumulated in double. f16 and bf16 logits are computed in float
// and only the outputs (log-probabilities, loss, gradients) are rounded to 16 bits, once each.
#include "tensor/ops/dispatch/loss_kernels.h"

#include <algorithm>
#include <type_traits>
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "tensor/ops/cpu/softmax_line.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

void cross_entropy_kernel(const Tensor& logits, const Tensor& target, const Tensor& log_probs, const Tensor& loss) {
  const Tensor x = logits.contiguous(), t = target.contiguous();
  const int64_t rows = x.size(0), classes = x.size(1);
  dispatch_floating_and_16bit(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;
    const T* px = x.data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    T* lp = log_probs.data_ptr<T>();
    // Each row's loss is -log p(correct class), computed from the row's log_softmax terms
    // while still in cache (exactly the stored entry for f32 and f64; unrounded for 16 bits).
    // The row losses are added up in order afterwards, so the result does not depend on the
    // number of threads.
    std::vector<double> row_loss(rows);
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelGrain)
    for (int64_t i = 0; i < rows; ++i) {
      const LogSoftmaxTerms<C> terms = log_softmax_line(px + i * classes, lp + i * classes, classes, 1);
      const C target_logit = static_cast<C>(px[i * classes + pt[i]]);
      row_loss[i] = -static_cast<double>((target_logit - terms.max) - terms.log_sum);
    }
    double total = 0.0;
    for (double l : row_loss) total += l;
    *loss.data_ptr<T>() = static_cast<T>(total / static_cast<double>(rows));
  });
}

void cross_entropy_backward_kernel(const Tensor& grad, const Tensor& log_probs, const Tensor& target,
                                   const Tensor& grad_logits) {
  const Tensor lp = log_probs.contiguous(), t = target.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  dispatch_floating_and_16bit(lp.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;
    const T* plp = lp.data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    T* dx = grad_logits.data_ptr<T>();
    // d(loss)/d(logits[i, j]) = (softmax[i, j] - [j == target[i]]) / N, times the loss's gradient.
    const C scale = static_cast<C>(grad.item() / static_cast<double>(rows));
    auto softmax_share = [&](int64_t k) { return scale * std::exp(static_cast<C>(plp[k])); };
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelGrain)
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < classes; ++j) dx[i * classes + j] = static_cast<T>(softmax_share(i * classes + j));
      T& target_entry = dx[i * classes + pt[i]];
      if constexpr (std::is_same_v<T, C>) {
        // f32 and f64 subtract the one-hot term from the stored share: the expression below may
        // compile to one fused multiply-add, whose other rounding would change f32 results.
        target_entry -= scale;
      } else {
        // A 16-bit entry is computed again, the one-hot term subtracted before its one rounding.
        target_entry = static_cast<T>(softmax_share(i * classes + pt[i]) - scale);
      }
    }
  });
}

void nll_loss_kernel(const Tensor& log_probs, const Tensor& target, const Tensor& loss) {
  const Tensor lp = log_probs.contiguous(), t = target.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  dispatch_floating_and_16bit(lp.dtype(), "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* plp = lp.data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    double total = 0.0;
    for (int64_t i = 0; i < rows; ++i) total -= static_cast<double>(plp[i * classes + pt[i]]);
    *loss.data_ptr<T>() = static_cast<T>(total / static_cast<double>(rows));
  });
}

void nll_loss_backward_kernel(const Tensor& grad, const Tensor& target, const Tensor& grad_log_probs) {
  const Tensor t = target.contiguous();
  const int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  dispatch_floating_and_16bit(grad_log_probs.dtype(), "nll_loss backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t* pt = t.data_ptr<int64_t>();
    T* dx = grad_log_probs.data_ptr<T>();
    // Only the picked entry of each row touched the loss, with weight -1/N.
    std::fill_n(dx, rows * classes, T(0));
    const T share = static_cast<T>(-grad.item() / static_cast<double>(rows));
    for (int64_t i = 0; i < rows; ++i) dx[i * classes + pt[i]] = share;
  });
}

}  // namespace lockstep::cpu
