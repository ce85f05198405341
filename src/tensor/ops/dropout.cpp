#include "tensor/ops/dropout.h"

#include "tensor/autograd/node.h"
#include "core/error.h"
#include "core/generator.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/dispatch/dropout_kernels.h"

namespace lockstep {

Tensor dropout(const Tensor& input, double p, bool training, Generator* generator) {
  check_defined("dropout", {&input});
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "dropout: expected a probability p between 0 and 1, got ", p);
  LOCKSTEP_CHECK(is_floating(input.dtype()), "dropout: expected a floating-point input, got ", dtype_name(input.dtype()));
  if (p == 0.0 || !training) return input;

  // Survivors are scaled by 1 / (1 - p); with p = 1 nothing survives and the scale is moot
  // (0, not infinity, which would turn the zeros into NaN).
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  // mask: input's shape and dtype, values 0 or scale. Both devices draw it with the same
  // counter-based generator (Philox, tensor/ops/rules/philox.h), keyed by one draw from the
  // generator, so the seed fixes it and the CPU and a GPU drop the same elements.
  const Tensor mask = empty(input.shape(), input.options());
  kernels::dropout_mask.call(input.device(), mask, p, scale, generator);

  const Tensor out = mul(input.detach(), mask);
  return record(out, "NativeDropoutBackward", {input}, [mask](const Tensor& g) { return std::vector<Tensor>{mul(g, mask)}; });
}

}  // namespace lockstep
