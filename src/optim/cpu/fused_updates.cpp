// The optimisers' updates on the CPU (declared in optim/fused_updates.h): sgd_rule and
// adam_rule (optim/sgd_rule.h, optim/adam_rule.h, shared with the CUDA kernels) for each of n
// contiguous elements, on several threads for large parameters.
#include "optim/fused_updates.h"

#include "tensor/strided_loop.h"

namespace lockstep::cpu {

//! [sgd loop]
// Inlined, the rule's switches become loop-invariant, and the compiler emits one vectorised
// loop per combination of them, provided it can prove that no store to param changes them:
// firstprivate gives every thread its own copy `c` of the constants (shared, or read through
// the reference, they might alias param, and the loops would stay scalar).
template <class T>
void sgd_update(int64_t n, T* param, const T* grad, T* buf, const SGDConstants<T>& constants) {
  const SGDConstants<T> c = constants;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain) firstprivate(c)
  for (int64_t i = 0; i < n; ++i) sgd_rule(i, param, grad, buf, c);
}
//! [sgd loop]

// The same loop for adam_rule, with its own copy of the constants for the same reason.
template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, const AdamConstants<T>& constants) {
  const AdamConstants<T> c = constants;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain) firstprivate(c)
  for (int64_t i = 0; i < n; ++i) adam_rule(i, param, grad, exp_avg, exp_avg_sq, c);
}

template void sgd_update<float>(int64_t, float*, const float*, float*, const SGDConstants<float>&);
template void sgd_update<double>(int64_t, double*, const double*, double*, const SGDConstants<double>&);
template void adam_update<float>(int64_t, float*, const float*, float*, float*, const AdamConstants<float>&);
template void adam_update<double>(int64_t, double*, const double*, double*, double*, const AdamConstants<double>&);

}  // namespace lockstep::cpu
