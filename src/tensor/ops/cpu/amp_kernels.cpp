// The CPU reference of loss scaling's unscale step: check and multiply in the same loop, so
// the gradients are read from memory once (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`).
#include "tensor/ops/dispatch/amp_kernels.h"

#include <atomic>
#include <cmath>

#include "core/dispatch.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

namespace {

// g[i * step] *= inv_scale for i < n; returns whether any g[i * step] was inf or NaN. The flag
// is or-ed rather than returned early, so the loop has no exit and vectorises.
template <class T>
bool unscale_row(T* g, int64_t n, int64_t step, T inv_scale) {
  bool non_finite = false;
  if (step == 1) {
    for (int64_t i = 0; i < n; ++i) {
      non_finite |= !std::isfinite(g[i]);
      g[i] *= inv_scale;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      non_finite |= !std::isfinite(g[i * step]);
      g[i * step] *= inv_scale;
    }
  }
  return non_finite;
}

}  // namespace

void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  // Rows run on several threads; any of them may find an inf, and "found" only ever goes from
  // false to true, so the order in which they set it does not matter.
  std::atomic<bool> found{false};
  for (const Tensor& grad : grads) {
    dispatch_floating(grad.dtype(), "unscale_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* data = static_cast<T*>(grad.storage()->data());
      for_each_row<1>(grad.shape(), {grad.strides()}, {grad.offset()},
                      [&](std::array<int64_t, 1> base, int64_t n, std::array<int64_t, 1> step) {
                        if (unscale_row(data + base[0], n, step[0], static_cast<T>(inv_scale))) {
                          found.store(true, std::memory_order_relaxed);
                        }
                      });
    });
  }
  if (found.load()) *found_inf.data_ptr<float>() = 1.0f;
}

}  // namespace lockstep::cpu
