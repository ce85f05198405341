// Dropout's mask on the CPU, made from other ops: one uniform draw per element, compared with
// the probability of keeping it.
#include "tensor/ops/dispatch/dropout_kernels.h"

#include "tensor/ops/elementwise.h"

namespace lockstep::cpu {

void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator) {
  // The draws are float64, so no uniform number rounds up to 1 before the comparison.
  const Tensor uniform = rand(mask.shape(), TensorOptions().dtype(DType::f64), generator);
  mask.copy_(lt(uniform, scalar_like(1.0 - p, uniform)));
  mask.mul_(scale);
}

}  // namespace lockstep::cpu
